"""The README's Python example runs and prints what its comments say."""
import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs_as_documented():
    text = README.read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {})
    printed = out.getvalue().splitlines()
    assert printed[0] == "train n2 (0, 1, 2, 3)"
    assert printed[1] == "notebook n2 (4,)"
    assert printed[2] == "(1000, 1000, 1000, 1000, 1000, 0, 0, 1000)"


def test_readme_gpu_set_example_prints_its_comments():
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    block = next(b for b in blocks if "select_gpus" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {})
    printed = out.getvalue().splitlines()
    commented = [line.split("#")[1].split(":")[0].strip() for line in block.splitlines() if "print(" in line]
    assert printed == commented == ["[0, 3]", "[0]", "[1, 2]"]


def test_readme_replay_example_follows_the_study_protocol():
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    block = next(b for b in blocks if "openb.load_default()" in b)
    scope: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), scope)
    curve = scope["curve"]
    assert curve.arrived_pods > curve.original_pods  # inflated beyond the trace, as the study does
    unallocated, fragment = (float(x) for x in out.getvalue().split())
    assert (unallocated, fragment) == (curve.at(100), curve.frag_at(100)) and 0 < unallocated < 10


def run_block(marker: str) -> tuple[str, list[str]]:
    """The README's Python block containing ``marker``, and the lines it prints."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    block = next(b for b in blocks if marker in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {})
    return block, out.getvalue().splitlines()


def test_readme_mig_example_prints_its_comments():
    block, printed = run_block('"mig"')
    assert printed == [line[2:].split("  ")[0] for line in block.splitlines() if line.startswith("# ")]


def test_readme_sharing_example_prints_its_comments():
    _, printed = run_block("gpuSharing")
    assert printed[0] == "(6, 7) {6: 2, 7: 1} True"
    assert printed[1] == (
        "0/1 nodes are available: 1 node(s) share their GPUs (time-slicing or MPS): they offer gpuSlots only."
    )


def test_readme_preemption_example_prints_its_comment():
    block, printed = run_block("placer.preempt(")
    assert printed == [line[2:] for line in block.splitlines() if line.startswith("# ")]


def test_readme_preempt_command_prints_its_output(capsys):
    from placer.cli import main

    match = re.search(r"```bash\n(placer preempt (\S+) (\S+))\n```\n\n```json\n(.*?)```", README.read_text(), re.S)
    assert match is not None
    data = README.parent / "tests" / "data" / "preemption"
    assert main(["preempt", str(data / match.group(2)), str(data / match.group(3))]) == 0
    assert capsys.readouterr().out == match.group(4)


def queues_section() -> str:
    text = README.read_text()
    return text[text.index("## Queues and quotas (Kueue)"):text.index("## Layout")]


def test_readme_admit_command_prints_its_output(tmp_path, monkeypatch, capsys):
    from placer.cli import main

    section = queues_section()
    queues, jobs = re.findall(r"```yaml\n(.*?)```", section, re.S)
    (tmp_path / "queues.yaml").write_text(queues, encoding="utf-8")
    (tmp_path / "jobs.yaml").write_text(jobs, encoding="utf-8")
    match = re.search(r"```bash\nplacer (admit .*?)\n```\n\n```\n(.*?)```", section, re.S)
    assert match is not None
    argv = match.group(1).split()
    argv[1] = str(README.parent / argv[1])  # the bundled example cluster, from the checkout
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    assert capsys.readouterr().out == match.group(2)


def test_readme_timeline_command_prints_its_output(tmp_path, monkeypatch, capsys):
    from placer.cli import main

    match = re.search(r"```bash\nplacer (simulate --timeline .*?)\n```\n\n```\n(.*?)```", queues_section(), re.S)
    assert match is not None
    monkeypatch.chdir(tmp_path)
    assert main(match.group(1).split() + ["--quiet"]) == 0
    assert capsys.readouterr().out == match.group(2)
    assert {p.name for p in (tmp_path / "tl").iterdir()} == {"timeline.csv", "queues.md", "timeline.png"}


def test_readme_sweep_spec_is_a_valid_sweep(tmp_path):
    from placer.replay.sweep import load_sweep

    block = next(b for b in re.findall(r"```yaml\n(.*?)```", README.read_text(), re.S) if "kind: Sweep" in b)
    (tmp_path / "s.yaml").write_text(block, encoding="utf-8")
    runs = load_sweep(tmp_path / "s.yaml").runs
    assert len(runs) == 3 * (3 + 1 + 1) * 10  # workloads x (fgd-pack weights + fgd + best-fit) x seeds


def test_readme_has_one_mig_section_and_no_repeated_paragraph():
    text = README.read_text()
    headings = re.findall(r"^#+ .*$", text, re.M)
    assert [h for h in headings if "MIG" in h] == ["## MIG and GPU sharing", "### Importing MIG"]
    assert len(headings) == len(set(headings))
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", re.sub(r"```.*?```", "", text, flags=re.S)) if p.strip()]
    repeated = {p[:60] for p in paragraphs if paragraphs.count(p) > 1 and not p.startswith("#")}
    assert repeated == set()


def test_readme_slurm_levels_are_as_the_importer_names_them():
    from placer.adapters.slurm.topology import parse_topology_conf

    text = " ".join(README.read_text().split())
    assert "`switch1` (the top switches) ... `switchD` (the leaf switch a node hangs from)" in text
    assert 'a gang kept under one leaf switch of a 3-level tree asks for `"level": "switch3"`' in text
    shown = (README.parent / "tests" / "data" / "slurm" / "handmade-scontrol-show-topology.txt").read_text()
    topology = parse_topology_conf(shown, "show-topology")
    assert topology.levels == ("switch1", "switch2", "switch3")
    levels = {line.split()[0][len("SwitchName="):]: int(line.split()[1][len("Level="):])
              for line in shown.splitlines() if line.startswith("SwitchName=")}
    for path in topology.nodes.values():  # switchK is Slurm's Level=D-K
        assert [levels[path[f"switch{k}"]] for k in (1, 2, 3)] == [2, 1, 0]
