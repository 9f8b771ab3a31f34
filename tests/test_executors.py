"""Runs on local processes and on a local Ray instance: the same results, a failing run tried
once more and then reported by its key while the others' results are kept, clear errors."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from placer.adapters import openb
from placer.cli import main
from placer.exceptions import InvalidInputError
from placer.replay.executors import run_tasks
from placer.model import PodRequest
from placer.replay.simulate import simulate
from test_simulate import nodes_csv


def square_unless_marked(shared: dict[str, Any], x: int) -> int:
    """x² plus the shared offset; x = 3 fails every time, x = 4 fails on its first try only
    (attempts are counted in files: the tries run in other processes)."""
    folder = Path(shared["folder"])
    tries = folder / f"tries-{x}"
    tries.write_text(tries.read_text() + "x" if tries.exists() else "x")
    if x == 3 or (x == 4 and tries.read_text() == "x"):
        raise ValueError(f"task {x} broke")
    return x * x + shared["offset"]


def outcomes(results: Any) -> tuple[dict[Any, int], dict[Any, str]]:
    values, failures = {}, {}
    for r in results:
        if r.failure is None:
            values[r.key] = r.value
        else:
            failures[r.key] = r.failure.error
    return values, failures


@pytest.mark.parametrize("jobs", [1, 2])
def test_local_runs_retry_once_and_report_by_key(tmp_path: Path, jobs: int) -> None:
    tasks = [(("w", x), (x,)) for x in range(6)]
    values, failures = outcomes(run_tasks(square_unless_marked, {"folder": str(tmp_path), "offset": 10}, tasks,
                                          jobs=jobs))
    assert values == {("w", x): x * x + 10 for x in (0, 1, 2, 4, 5)}
    assert failures == {("w", 3): "ValueError: task 3 broke"}
    assert (tmp_path / "tries-3").read_text() == "xx" and (tmp_path / "tries-4").read_text() == "xx"
    assert (tmp_path / "tries-0").read_text() == "x"


@pytest.mark.parametrize("kwargs, where", [
    ({"executor": "dask"}, "--executor"), ({"jobs": 0}, "--jobs"), ({"address": "auto"}, "--address"),
])
def test_bad_executor_settings_are_refused(kwargs: dict[str, Any], where: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        run_tasks(square_unless_marked, {}, [(1, (1,))], **kwargs)
    assert e.value.where == where


def test_ray_missing_is_an_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(InvalidInputError, match=r"pip install 'placer\[ray\]'"):
        run_tasks(square_unless_marked, {}, [(1, (1,))], executor="ray")
    assert main(["simulate", "--executor", "ray", "--out", "never"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "placer[ray]" in err and "Traceback" not in err


# ---------------------------------------------------------------------- on a local Ray

ray = pytest.importorskip("ray", reason="Ray is the optional extra placer[ray]; CI installs it")


def closed_loopback_port() -> int:
    """A loopback port nothing listens on (bound once, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("scheme", ["ray://", ""])
def test_an_address_where_no_ray_answers_is_one_line_after_the_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scheme: str
) -> None:
    address = f"{scheme}127.0.0.1:{closed_loopback_port()}"
    for command in (["simulate"], ["simulate", "--timeline"], ["sweep", "fgd-study"]):
        argv = [*command, "--executor", "ray", "--address", address, "--connect-timeout", "0.3",
                "--out", str(tmp_path / "never")]
        assert main(argv) == 2
        assert capsys.readouterr().err == f"placer: error: --address {address}: no Ray cluster answered within 0.3 s\n"
    assert not (tmp_path / "never").exists()
    with pytest.raises(InvalidInputError, match="no Ray cluster answered within 0.2 s"):
        list(run_tasks(square_unless_marked, {}, [(1, (1,))], executor="ray", address=address, connect_timeout=0.2))


def test_a_listener_that_is_not_ray_is_given_up_on_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Something accepts connections on the port but never speaks Ray's protocol: Ray's client
    # gives up within the timeout, not after its own 5 + 10 + 15 s.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        address = f"ray://127.0.0.1:{listener.getsockname()[1]}"
        argv = ["sweep", "fgd-study", "--executor", "ray", "--address", address, "--connect-timeout", "1",
                "--out", str(tmp_path / "never")]
        assert main(argv) == 2
    assert capsys.readouterr().err == f"placer: error: --address {address}: no Ray cluster answered within 1 s\n"
    assert not ray.is_initialized()


def test_connect_timeout_must_be_positive_seconds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--connect-timeout", "0", "--out", str(tmp_path / "never")]) == 2
    assert capsys.readouterr().err.startswith("placer: error: --connect-timeout: expected a number of seconds > 0")


def test_a_ray_client_address_without_the_client_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)  # Ray without ray[client]
    assert main(["sweep", "fgd-study", "--executor", "ray", "--address", "ray://127.0.0.1:1",
                 "--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'placer[ray]'" in err and "Traceback" not in err
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert 'ray = ["ray[client]>=2.9"]' in pyproject  # the extra brings Ray's client


@pytest.fixture(scope="module")
def local_ray() -> Any:
    """A local Ray instance with 2 CPUs for this module, stopped at its end. Ray's workers do not
    have tests/ on their path: this module's functions are sent by value."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
    assert not ray.is_initialized()


def test_ray_runs_retry_once_and_report_by_key(tmp_path: Path, local_ray: Any) -> None:
    tasks = [(("w", x), (x,)) for x in range(6)]
    values, failures = outcomes(run_tasks(square_unless_marked, {"folder": str(tmp_path), "offset": 10}, tasks,
                                          executor="ray"))
    assert values == {("w", x): x * x + 10 for x in (0, 1, 2, 4, 5)}
    assert list(failures) == [("w", 3)] and "task 3 broke" in failures[("w", 3)]
    assert (tmp_path / "tries-3").read_text() == "xx" and (tmp_path / "tries-4").read_text() == "xx"
    assert local_ray.is_initialized()  # a Ray it did not start is left running


def test_simulate_on_ray_gives_the_local_curves(local_ray: Any) -> None:
    snapshot = openb.read_nodes(nodes_csv(8, 8, 4, 2))
    pods = [PodRequest(f"p{i:02d}", gpus=1 + i % 2, gpu_milli=1000, cpu_milli=1000) for i in range(12)]
    pods += [PodRequest(f"s{i:02d}", gpus=1, gpu_milli=300 + 100 * i, cpu_milli=500) for i in range(5)]
    here = simulate(snapshot, pods, ["fgd-pack", "best-fit"], [1, 2], jobs=1, progress=False, name="w")
    there = simulate(snapshot, pods, ["fgd-pack", "best-fit"], [1, 2], progress=False, name="w", executor="ray")
    assert [(c.policy, c.seed) for c in there] == [(c.policy, c.seed) for c in here]
    for x, y in zip(here, there):
        assert x.unallocated_pct.tolist() == y.unallocated_pct.tolist()
        assert x.frag_pct.tolist() == y.frag_pct.tolist()
        assert x.placed_pods == y.placed_pods


def test_a_sweep_on_ray_writes_the_local_results(tmp_path: Path, local_ray: Any) -> None:
    import placer.replay.sweep as sweep
    from test_sweep import write_spec

    spec = write_spec(tmp_path, policies=["fgd-pack", "random"], seeds="1-3")
    sweep.run_sweep(spec, tmp_path / "local", jobs=2, progress=False, plot=False)
    outcome = sweep.run_sweep(spec, tmp_path / "ray", executor="ray", progress=False, plot=False)
    assert (outcome.ran, outcome.failures) == (6, [])
    local = (tmp_path / "local" / "results.csv").read_text()
    assert (tmp_path / "ray" / "results.csv").read_text() == local and local.count("\n") == 7
    assert (tmp_path / "ray" / "summary.md").read_text() == (tmp_path / "local" / "summary.md").read_text()


SLEEPING_SWEEP = """
import time
from placer.replay.executors import run_tasks
for _ in run_tasks(time.sleep, 600, [(0, ()), (1, ())], jobs=2):  # two workers, each asleep for 10 minutes
    pass
"""


def _children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (read from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == pid and state != "Z":
                found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_local_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", SLEEPING_SWEEP], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while len(workers := _children(parent.pid)) < 2:
            assert time.monotonic() < deadline and parent.poll() is None, "the workers did not start"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "workers outlived their killed parent"
