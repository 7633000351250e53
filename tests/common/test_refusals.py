"""Every refusal of the validation layer, through the API and the command line (table-driven).

Each case asserts the error type and that the message names the parameter
(API) or the option (command line); command-line usage errors are one line on
stderr with exit status 2.  Memory refusals run in a child process under a
small ``RLIMIT_AS``.  Overflow and conditioning cases check what is reported
instead of a wrong number.
"""

import copy as copy_module
import dataclasses
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers.paths import ROOT
import sheaflinalg as sl
from sheaflinalg.cli import main
from sheaflinalg.discord import edge_discrepancies, group

X5 = np.random.default_rng(0).uniform(-2, 2, (5, 2))


def mknet(dims, seed=0, output="identity"):
    return sl.Network.random(list(dims), seed=seed, output=output)


NET = mknet((2, 4, 1))
NET30 = mknet((2, 30, 1))
SYSTEM = sl.assemble(NET, X5[:2], reduced=True)
X_TRAIN, Y_TRAIN = sl.tasks.paraboloid(20, seed=0)

API_CASES = [
    # networks: integers that are integers, seeds, outputs
    ("dims float", lambda: sl.Network.random([2.7, 30.9, 1]), TypeError, "dims[0]"),
    ("dims zero", lambda: sl.Network.random([2, 0, 1]), ValueError, "dims"),
    ("dims string", lambda: sl.Network.random("2,3,1"), TypeError, "dims"),
    ("seed str", lambda: sl.Network.random([2, 3, 1], seed="abc"), TypeError, "seed"),
    ("seed float", lambda: sl.Network.random([2, 3, 1], seed=1.5), TypeError, "seed"),
    ("seed negative", lambda: sl.Network.random([2, 3, 1], seed=-1), ValueError, "seed"),
    ("output unknown", lambda: sl.Network.random([2, 3, 1], output="relu"), ValueError, "output"),
    ("weights not a sequence", lambda: sl.Network(3.0, [np.zeros(1)]), TypeError, "weights"),
    ("from_parameters dims", lambda: sl.Network.from_parameters(np.zeros(13), [2, 3.0, 1]), TypeError, "dims[1]"),
    ("from_parameters nan", lambda: sl.Network.from_parameters(np.full(13, np.nan), [2, 3, 1]), ValueError,
     "theta"),
    ("replace bad shape", lambda: NET.replace(W2=np.ones((1, 7))), ValueError, "W2"),
    ("replace unknown layer", lambda: NET.replace(W9=np.ones((1, 4))), TypeError, "W9"),
    # heat
    ("heat dt str", lambda: sl.heat(NET, X5, dt="0.01"), TypeError, "dt"),
    ("heat dt nan", lambda: sl.heat(NET, X5, dt=np.nan), ValueError, "dt"),
    ("heat alpha neg", lambda: sl.heat(NET, X5, alpha=-1.0), ValueError, "alpha"),
    ("heat tol inf", lambda: sl.heat(NET, X5, tol=np.inf), ValueError, "tol"),
    ("heat tol neg", lambda: sl.heat(NET, X5, tol=-1e-3), ValueError, "tol"),
    ("heat max_steps float", lambda: sl.heat(NET, X5, max_steps=2.5), TypeError, "max_steps"),
    ("heat max_steps bool", lambda: sl.heat(NET, X5, max_steps=True), TypeError, "max_steps"),
    ("heat max_steps huge", lambda: sl.heat(NET, X5, max_steps=10**30), ValueError, "max_steps"),
    ("heat record_every neg", lambda: sl.heat(NET, X5, record_every=-1), ValueError, "record_every"),
    ("heat seed str", lambda: sl.heat(NET, X5, seed="abc"), TypeError, "seed"),
    ("heat threads float", lambda: sl.heat(NET, X5, threads=1.5), TypeError, "threads"),
    ("heat ragged X", lambda: sl.heat(NET, [[1.0, 2.0], [3.0]]), ValueError, "X"),
    ("heat X nan", lambda: sl.heat(NET, [[1.0, np.nan]]), ValueError, "X"),
    ("heat X str", lambda: sl.heat(NET, [["a", "b"]]), TypeError, "X"),
    ("heat output_force", lambda: sl.heat(NET, X5, output_force="x"), ValueError, "output_force"),
    ("heat exact dt", lambda: sl.heat(NET, X5, method="exact", dt=0.05), ValueError, "does not use dt"),
    ("heat euler t_max", lambda: sl.heat(NET, X5, t_max=1.0), ValueError, "does not use t_max"),
    ("heat method", lambda: sl.heat(NET, X5, method="rk4"), ValueError, "method"),
    # verify, complete, assemble, harmonic extension, discord
    ("verify tol neg", lambda: sl.verify(NET, X5, tol=-1), ValueError, "tol"),
    ("verify tol nan", lambda: sl.verify(NET, X5, tol=np.nan), ValueError, "tol"),
    ("verify logdet_tol inf", lambda: sl.verify(NET, X5, logdet_tol=np.inf), ValueError, "logdet_tol"),
    ("verify backend", lambda: sl.verify(NET, X5, backend="lapack"), ValueError, "backend"),
    ("complete backend", lambda: sl.complete(NET, X5, backend="lapack"), ValueError, "backend"),
    ("complete max_iter", lambda: sl.complete(NET, X5, max_iter=0), ValueError, "max_iter"),
    ("complete nonunique", lambda: sl.complete(NET, X5, nonunique="x"), ValueError, "nonunique"),
    ("assemble ragged", lambda: sl.assemble(NET, [[1.0, 2.0], [3.0]]), ValueError, "x"),
    ("assemble linearise_at nan", lambda: sl.assemble(mknet((2, 3, 1), output="sigmoid"), X5[:1],
                                                        linearise_at=[np.nan]), ValueError, "linearise_at"),
    ("harmonic X inf", lambda: sl.harmonic_extension(NET, [[np.inf, 0.0]]), ValueError, "X"),
    ("discord free shape", lambda: edge_discrepancies(SYSTEM, np.zeros((2, 3))), ValueError, "free"),
    ("discord grouping", lambda: group(np.ones(3), ["e_z1", "e_a1", "e_z2"], by="x"), ValueError, "by"),
    # spectrum and ARPACK options
    ("spectrum maxiter 0", lambda: sl.spectrum(NET30, X5, method="arpack", maxiter=0), ValueError, "maxiter"),
    ("spectrum ncv 1", lambda: sl.spectrum(NET30, X5, method="arpack", ncv=1), ValueError, "ncv"),
    ("spectrum ncv > N", lambda: sl.spectrum(NET30, X5, method="arpack", ncv=10**6), ValueError, "ncv"),
    ("spectrum ncv float", lambda: sl.spectrum(NET30, X5, method="arpack", ncv=20.0), TypeError, "ncv"),
    ("spectrum tol nan", lambda: sl.spectrum(NET30, X5, tol=np.nan), ValueError, "tol"),
    ("spectrum tol str", lambda: sl.spectrum(NET30, X5, tol="1e-8"), TypeError, "tol"),
    ("spectrum k float", lambda: sl.spectrum(NET30, X5, k=1.0), TypeError, "k"),
    ("spectrum pattern scalar", lambda: sl.spectrum(NET30, X5, pattern=1.5), TypeError, "pattern"),
    ("complete pattern ragged", lambda: sl.complete(NET, X5, pattern=[[[1, 0], [1]]]), ValueError, "pattern"),
    ("spectrum threads", lambda: sl.spectrum(NET30, X5, threads=0), ValueError, "threads"),
    ("spectrum dense_max", lambda: sl.spectrum(NET30, X5, dense_max=-1), ValueError, "dense_max"),
    ("spectrum_of_system maxiter", lambda: sl.spectrum_of_system(SYSTEM, method="arpack", maxiter=0,
                                                                 progress=False), ValueError, "maxiter"),
    ("tracker every", lambda: sl.SpectralTracker(X5, every=0), ValueError, "every"),
    ("tracker tol", lambda: sl.SpectralTracker(X5, tol=-1.0), ValueError, "tol"),
    ("tracker k", lambda: sl.SpectralTracker(X5, k=1.5), TypeError, "k"),
    # tasks
    ("make noise nan", lambda: sl.tasks.make("paraboloid", 10, 3, noise=np.nan), ValueError, "noise"),
    ("make noise blobs", lambda: sl.tasks.make("blobs", 10, 3, noise=0.1), ValueError, "noise"),
    ("make n_train float", lambda: sl.tasks.make("saddle", 2.5, 3), TypeError, "n_train"),
    ("make n_test zero", lambda: sl.tasks.make("saddle", 10, 0), ValueError, "n_test"),
    ("make task", lambda: sl.tasks.make("moons", 10, 3), ValueError, "task"),
    ("make seed", lambda: sl.tasks.make("circular", 10, 3, seed=-1), ValueError, "seed"),
    ("paraboloid noise inf", lambda: sl.tasks.paraboloid(10, noise=np.inf), ValueError, "noise"),
    ("saddle seed str", lambda: sl.tasks.saddle(10, seed="abc"), TypeError, "seed"),
    ("make too many", lambda: sl.tasks.make("paraboloid", 10**15, 3), sl.InsufficientMemoryError, "n_train"),
    ("random too wide", lambda: sl.Network.random([2, 10**8, 10**8, 1]), sl.InsufficientMemoryError,
     "smaller widths"),
    ("blobs n float", lambda: sl.tasks.blobs(8.0), TypeError, "n"),
    # training
    ("train seed", lambda: sl.train(NET, X_TRAIN, Y_TRAIN, steps=10, seed="abc", progress=False),
     TypeError, "seed"),
    ("train dt str", lambda: sl.train(NET, X_TRAIN, Y_TRAIN, dt="0.01", progress=False), TypeError, "dt"),
    ("train steps float", lambda: sl.train(NET, X_TRAIN, Y_TRAIN, steps=10.0, progress=False), TypeError, "steps"),
    ("train warm_start", lambda: sl.train(NET, X_TRAIN, Y_TRAIN, steps=10, warm_start="yes", progress=False),
     TypeError, "warm_start"),
    ("train init dict", lambda: sl.train(NET, X_TRAIN, Y_TRAIN, steps=10, init={"a": 1}, progress=False),
     TypeError, "init"),
    ("train reg mu", lambda: sl.train(NET, X_TRAIN, Y_TRAIN, steps=10, reg={"mu": "x"}, progress=False),
     TypeError, "mu"),
    ("sgd lr nan", lambda: sl.sgd(NET, X_TRAIN, Y_TRAIN, lr=np.nan, progress=False), ValueError, "lr"),
    ("sgd epochs float", lambda: sl.sgd(NET, X_TRAIN, Y_TRAIN, epochs=2.0, progress=False), TypeError, "epochs"),
    ("sgd loss_param str", lambda: sl.sgd(NET, X_TRAIN, Y_TRAIN, loss="huber", loss_param="x", progress=False),
     TypeError, "loss_param"),
    # flags are booleans, never read by truthiness
    ("spectrum vectors str", lambda: sl.spectrum(NET, X5, vectors="no", progress=False), TypeError, "vectors"),
    ("spectrum full int", lambda: sl.spectrum(NET, X5, full=1, progress=False), TypeError, "full"),
    ("spectrum_of_system vectors", lambda: sl.spectrum_of_system(SYSTEM, vectors=None), TypeError, "vectors"),
    ("assemble reduced str", lambda: sl.assemble(NET, X5, reduced="yes"), TypeError, "reduced"),
    ("spectrum progress str", lambda: sl.spectrum(NET, X5, progress="no"), TypeError, "progress"),
    ("train progress str", lambda: sl.train(NET, X_TRAIN, Y_TRAIN, steps=10, progress="no"), TypeError, "progress"),
    ("heat progress str", lambda: sl.heat(NET, X5, max_steps=10, progress="no"), TypeError, "progress"),
    ("sgd progress int", lambda: sl.sgd(NET, X_TRAIN, Y_TRAIN, epochs=10, progress=0), TypeError, "progress"),
    ("Layout reduced str", lambda: sl.Layout([2, 3, 1], reduced="no"), TypeError, "reduced"),
    ("heat crossings str", lambda: sl.heat(NET, X5, crossings="no", progress=False), TypeError, "crossings"),
    ("heat check_stability", lambda: sl.heat(NET, X5, check_stability=0, progress=False), TypeError,
     "check_stability"),
    ("heat reduced str", lambda: sl.heat(NET, X5, reduced="no", progress=False), TypeError, "reduced"),
    ("load None", lambda: sl.Network.load(None), TypeError, "path must be a file name"),
    # an option the path ignores is refused
    ("spectrum solver unpinned", lambda: sl.spectrum(NET, X5, solver="superlu", progress=False), ValueError,
     "solver='superlu' has no effect without pins"),
    ("spectrum solver bogus", lambda: sl.spectrum(NET, X5, solver="bogus", progress=False), ValueError, "solver"),
    ("lambda_max_bound gamma str", lambda: sl.lambda_max_bound(NET, gamma_max="1"), TypeError, "gamma_max"),
    ("lambda_max_bound reluctance<0", lambda: sl.lambda_max_bound(NET, reluctance=-1.0), ValueError,
     "reluctance"),
    ("residuals layout", lambda: sl.discord.residuals(NET, X5, np.zeros((5, 10)), layout="full"), TypeError,
     "sheaflinalg.Layout"),
    ("assemble linearise_at shape", lambda: sl.assemble(NET, X5, linearise_at=np.zeros((2, 1))), ValueError,
     "linearise_at"),
]


@pytest.mark.parametrize("name, call, error, needle", API_CASES, ids=[c[0] for c in API_CASES])
def test_api_refusal(name, call, error, needle):
    with pytest.raises(error) as info:
        call()
    assert needle in str(info.value)


CLI_CASES = [
    (["heat", "--arch", "2,,1"], "--arch"),
    (["heat", "--arch", "2,x,1"], "--arch"),
    (["heat", "--network", "net.npz", "--output", "sigmoid"], "--output"),
    (["spectrum", "--network", "net.npz", "--arch", "2,3,1"], "--arch"),
    (["heat", "--input", ""], "--input"),
    (["heat", "--input", "1,nan"], "--input"),
    (["heat", "--input", "1,2", "--samples", "3"], "--samples"),
    (["heat", "--input", "1,2,3"], "--input"),
    (["heat", "--method", "exact", "--dt", "5"], "dt"),
    (["train", "--method", "sgd", "--checkpoint", "run.npz"], "--checkpoint"),
    (["train", "--method", "sgd", "--dt", "0.01"], "--dt"),
    (["train", "--lr", "0.01"], "--lr"),
    (["train", "--method", "equilibrium", "--dt", "0.01"], "--dt"),
    (["train", "--method", "equilibrium", "--steps", "10"], "--steps"),
    (["train", "--epochs", "3"], "--epochs"),
    (["train", "--method", "sgd", "--batch-size", "10"], "--batch-size"),
    (["train", "--method", "equilibrium", "--optimizer", "adma"], "did you mean 'adam'"),
    (["train", "--method", "equilibrium", "--schedule", "cosin"], "did you mean 'cosine'"),
    (["train", "--method", "equilibrium", "--batch-size", "301"], "batch_size"),
    (["train", "--experiment", "x.npz", "--task", "saddle"], "--task"),
    (["train", "--task", "moons"], "--task"),
    (["heat", "--output", "relu"], "--output"),
    (["heat", "--bogus"], "--bogus"),
    (["heat", "--dt"], "--dt"),
    (["heat", "--pin", "a1[0]=inf"], "--pin"),
    (["bogus"], "COMMAND"),
] + [([cmd, opt, bad], opt) for cmd, opts in {
    "heat": ["--dt", "--alpha", "--tol", "--max-steps", "--record-every", "--gamma", "--threads", "--seed",
             "--samples"],
    "spectrum": ["--seed", "--samples", "-k", "--tol"],
    "verify": ["--seed", "--samples"],
    "train": ["--steps", "--dt", "--alpha", "--beta", "--n-train", "--n-test", "--seed", "--loss-param",
              "--threads", "--epochs", "--batch-size", "--nudging"],
}.items() for opt in opts for bad in ("abc", "nan", "-1", "inf", "2.5") if not (
    bad == "2.5" and opt in ("--dt", "--alpha", "--tol", "--gamma", "--beta", "--loss-param", "--nudging")) and not (
    bad == "-1" and opt == "--loss-param")]


@pytest.mark.parametrize("argv", [c[0] for c in CLI_CASES], ids=[" ".join(c[0]) for c in CLI_CASES])
def test_cli_usage_error(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    needle = dict((tuple(a), n) for a, n in CLI_CASES)[tuple(argv)]
    assert main(argv + ["--no-progress"] if argv != ["bogus"] else argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert needle in err
    assert captured.out == ""  # refused before any work


def test_cli_usage_error_in_a_real_process():
    proc = subprocess.run([sys.executable, "-m", "sheaflinalg.cli", "heat", "--dt", "x"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["sheaflinalg heat: error: --dt must be a finite number > 0, got 'x'"]


def test_blobs_split_is_exact():
    d = sl.tasks.make("blobs", 10, 3, seed=0)
    assert d.X_train.shape == (10, 2) and d.X_test.shape == (3, 2) and d.Y_test.shape == (3, 4)
    # a multiple of 4 is unchanged: the same draw as before
    X, Y = sl.tasks.blobs(400, seed=0)
    np.testing.assert_array_equal(sl.tasks.make("blobs", 300, 100, seed=0).X_test, X[300:])


def test_networks_are_immutable():
    net = mknet((2, 4, 1))
    with pytest.raises(TypeError):
        net.weights[1] = np.ones((1, 7))
    with pytest.raises(ValueError, match="read-only"):
        net.weights[1][0, 0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        net.biases[0] += 1.0
    with pytest.raises(AttributeError):
        net.output = "sigmoid"
    assert isinstance(net.weights[1], np.ndarray)
    W = np.array(net.weights[1])
    changed = net.replace(W2=2 * W)
    np.testing.assert_array_equal(changed.forward(X5), 2 * net.forward(X5))
    np.testing.assert_array_equal(net.weights[1], W)          # the original is untouched
    np.testing.assert_array_equal(net.with_weights(net.weights).forward(X5), net.forward(X5))
    for twin in (copy_module.copy(net), copy_module.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert not twin.weights[0].flags.writeable
        np.testing.assert_array_equal(twin.forward(X5), net.forward(X5))
    source = np.ones((1, 4))
    copy = net.replace(W2=source)
    source[0, 0] = 99.0                                       # the network copied its input
    assert copy.weights[1][0, 0] == 1.0


def test_forward_overflow_names_the_layer():
    net = mknet((2, 4, 4, 1))
    big = net.replace(weights=[W * 1e150 for W in net.weights])
    for call in (lambda: big.forward(X5), lambda: sl.heat(big, X5, progress=False),
                 lambda: sl.spectrum(big, X5, progress=False), lambda: sl.verify(big, X5),
                 lambda: sl.complete(big, X5)):
        with pytest.raises(sl.NetworkOverflowError, match="overflows at layer 3"):
            call()


def test_spectrum_refuses_what_float64_cannot_resolve():
    net = mknet((2, 4, 4, 1))
    big = net.replace(weights=[W * 1e50 for W in net.weights])
    with pytest.raises(sl.IllConditionedSpectrumError, match="method='arpack'"):
        sl.spectrum(big, X5, method="dense", progress=False)
    # ARPACK's shift-invert by substitution resolves it: positive, as L is SPD by structure
    assert np.all(sl.spectrum(big, X5, method="arpack", progress=False).lambda_min > 0)
    huge = mknet((2, 3, 1)).replace(W2=np.full((1, 3), 1e160))
    with pytest.raises(sl.NetworkOverflowError, match="W2 is too large"):
        sl.spectrum(huge, X5, progress=False)


def test_training_divergence_is_still_reported_not_refused():
    """Weights that grow past float64 during a run end it as diverged (as before), and a spectral
    tracker watching it notes the step instead of stopping the run."""
    X, Y = sl.tasks.paraboloid(10, seed=0)
    tracker = sl.SpectralTracker(X, every=1)
    with pytest.warns(sl.DivergenceWarning):
        fit = sl.sgd(mknet((2, 4, 1)), X, Y, lr=1.5, epochs=20, record_every=1, callback=tracker,
                     callback_every=1, progress=False)
    assert fit.history.diverged and "diverged during epoch" in fit.history.message
    assert tracker.records and len(tracker.records) + len(tracker.skipped) >= 3
    assert all("overflow" in msg or "ill-conditioned" in msg or "too large" in msg for _, msg in tracker.skipped)


def _network_1_1e8():
    """A valid network with weights 1 and 1e8: L[Omega,Omega] has condition ~1e32."""
    return sl.Network([np.ones((1, 2)), np.array([[1e8]])], [np.zeros(1), np.zeros(1)])


def test_verify_is_inconclusive_not_failed_when_conditioning_is_the_cause():
    net = _network_1_1e8()
    X = np.abs(X5)                      # active hidden neuron: the output is 1e8 (x1 + x2)
    report = sl.verify(net, X)
    assert report.status == "INCONCLUSIVE" and not report.passed
    assert np.all(report.det_certificate)                        # det delta_Omega = 1 by structure
    assert np.all(report.checks["harmonic = forward"])
    assert np.all(report.condition > 1e15)
    text = str(report)
    assert "RESULT: INCONCLUSIVE" in text and "condition number" in text and "FAILED" not in text
    good = sl.verify(mknet((2, 30, 1)), X5)
    assert good.status == "PASSED" and "RESULT: PASSED" in str(good)
    # a failure the conditioning cannot explain stays FAILED
    broken = dataclasses.replace(good, det_certificate=np.zeros(5, dtype=bool))
    assert broken.status == "FAILED" and "RESULT: FAILED" in str(broken)
    bad_logdet = dataclasses.replace(good, logdet_laplacian=np.full(5, np.nan))
    assert bad_logdet.status == "FAILED"


def test_verify_command_reports_inconclusive(tmp_path, capsys):
    path = tmp_path / "n.npz"
    _network_1_1e8().save(str(path))
    code = main(["verify", "--network", str(path), "--samples", "4"])
    out = capsys.readouterr().out
    assert "RESULT: INCONCLUSIVE" in out or "RESULT: PASSED" in out   # inputs uniform on [-2, 2]^2
    assert code == (3 if "RESULT: INCONCLUSIVE" in out else 0)


@pytest.mark.parametrize("nonunique", ["error", "minimum_norm"])
def test_complete_decides_uniqueness_from_the_structure(nonunique):
    net = _network_1_1e8()
    X = np.abs(X5)
    c = sl.complete(net, X, nonunique=nonunique)
    assert c.unique and c.method == "substitution"
    np.testing.assert_allclose(c.output, net.forward(X), rtol=1e-14)
    # a clamped hidden value keeps every defining edge: unique, solved despite the conditioning
    c = sl.complete(net, X, pins={"a1[0]": 2.0}, nonunique=nonunique)
    assert c.unique
    np.testing.assert_allclose(c.output, 2e8, rtol=1e-12)


def test_complete_unchanged_for_ordinary_networks():
    net = mknet((2, 6, 3, 1))
    c = sl.complete(net, X5)
    assert c.unique and c.method == "substitution"
    np.testing.assert_allclose(c.output, net.forward(X5), rtol=1e-13, atol=1e-13)
    with pytest.raises(sl.NonUniqueCompletionError, match="not unique"):
        sl.complete(net, X5, pins={"yhat": 0.3}, free_inputs=[0, 1])


_CHILD = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import sheaflinalg as sl
    from sheaflinalg._common.memory import available_bytes
    net = sl.Network.random([20, 30, 30, 1], seed=0)
    X = np.random.default_rng(0).uniform(-2, 2, size=(3000, 20))
    sl.spectrum(net, X[:20], method="dense", progress=False)          # warm up under no limit
    sl.spectrum(net, X[:3], method="arpack", progress=False)
    used = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (used + 300 * 2**20, resource.RLIM_INFINITY))
    print("available", available_bytes() // 2**20)
    results = []
    for what, call in [("spectrum", lambda: sl.spectrum(net, X, method="dense", progress=False)),
                       ("assemble", lambda: sl.assemble(net, np.tile(X, (2, 1))))]:
        try:
            call()
            results.append(what + " ran")
        except sl.InsufficientMemoryError as exc:
            results.append(what + " refused: " + str(exc))
    small = sl.spectrum(net, X[:50], method="dense", progress=False)   # what fits still runs
    results.append("small ran %d" % small.n_samples)
    arp = sl.spectrum(net, X[:20], method="arpack", progress=False)
    results.append("arpack ran %d" % arp.n_samples)
    print("\\n".join(results))
""")


def test_memory_refusals_under_rlimit_as():
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert int(lines[0].split()[1]) <= 300
    spectrum, assemble, small, arpack = lines[1:5]
    assert spectrum.startswith("spectrum refused:") and "method='arpack'" in spectrum and "MiB" in spectrum
    assert assemble.startswith("assemble refused:") and "fewer samples" in assemble
    assert small == "small ran 50" and arpack == "arpack ran 20"


def test_memory_refusal_on_the_command_line():
    code = textwrap.dedent("""
        import resource, sys
        import sheaflinalg as sl
        from sheaflinalg.cli import main
        used = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (used + 400 * 2**20, resource.RLIM_INFINITY))
        sys.exit(main(["spectrum", "--arch", "20,30,30,1", "--samples", "4000", "--method", "dense",
                       "--no-progress"]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "method='arpack'" in err[0] and "needed" in err[0]
