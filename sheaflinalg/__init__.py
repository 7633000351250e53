
__all__ += ["AugmentedSheafSystem", "heat", "HeatResult", "HeatHistory", "NonFiniteStateError",
            "lambda_max_bound", "SoftPins", "Reluctance", "discord"]
