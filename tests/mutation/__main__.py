"""``make mutation``: mutmut on each package, one working directory each, kill rates printed.

Why mutmut and this layout: mutmut 3 copies the sources into ``mutants/``, puts every mutant of a
function behind a trampoline and, per mutant, forks and runs only the tests that called that
function (recorded in one traced run), so a run costs far less than the suite times the
mutants. It names a mutant after the file's path, and the trampoline compares that name with the
function's ``__module__`` at run time: the sources must therefore be walked as
``neardup/core``/``neardup/app`` (the links in neardup/, which mutmut reads through to the real
core/ and app/ files), never as ``core``/``app``, or no mutant would ever be switched on. Each
package gets a directory ``.mutation/PACKAGE/`` with links to neardup/, tests/ and bench/ and a
pyproject.toml of its own (the repository's plus a ``[tool.mutmut]`` table: mutmut reads its
settings from the working directory), so each package runs only the fast tests that cover it.
``PYTHONPATH`` names that ``mutants/`` folder, so processes a test starts (the core's worker
pool, the CLI, Spark's Python workers) import the mutated copy too, with the mutant switched on
(``MUTANT_UNDER_TEST`` is inherited).

``--with-postgres`` (service: pgstore.py and its PostgreSQL tests) starts ONE throwaway
PostgreSQL server before mutmut (``bench.common.postgres``, as the tests' own fixture does) and
names it in ``NEARDUP_TEST_POSTGRES``: the tests' ``postgres`` fixture then uses it instead of
starting a server per mutant (each test still gets new databases, dropped after), and the
harness removes it when mutmut ends.

Not measured (mutmut leaves them alone): decorated functions other than ``@staticmethod`` and
``@classmethod`` (so the numba kernels of core/_jit.py, ``@property`` and ``@cache`` functions),
annotations, and default values that are not plain constants.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from bench.common.postgres import SHARED, PostgresServer

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / ".mutation"
TRIAGE = Path(__file__).with_name("TRIAGE.md")


@dataclass(frozen=True)
class Package:
    """What one package's run mutates and which tests it runs."""

    mutate: list[str]
    tests: list[str]
    #: where ``--tests`` names this package's tests (or names one of ``tests``)
    tests_root: str
    skip: list[str] = field(default_factory=list)
    #: added by ``--with-jobs``: a few tests that each run a job (Spark: a context per mutant)
    jobs: list[str] = field(default_factory=list)
    # "fork" (mutmut's default) forks each mutant from the process that ran the traced tests;
    # the Spark tests need "forkserver": a JVM gateway must not be shared by forked children.
    isolation: str = "fork"


# The fast tests that cover each package (docs in TRIAGE.md say why these).
PACKAGES: dict[str, Package] = {
    "core": Package(mutate=["neardup/core/*"], tests=["tests/core"], tests_root="tests/core"),
    "service": Package(
        mutate=["neardup/app/service/*"],
        tests_root="tests/app/service",
        # In process, no PostgreSQL: pgstore.py is measured only with the PostgreSQL tests
        # (``--package service --with-postgres``), on one server for the whole run.
        tests=[
            "tests/app/service/test_access.py",
            "tests/app/service/test_dirlock.py",
            "tests/app/service/test_exports.py",
            "tests/app/service/test_index.py",
            "tests/app/service/test_limits.py",
            "tests/app/service/test_lookups.py",
            "tests/app/service/test_operations.py",
            "tests/app/service/test_pool.py",
            "tests/app/service/test_store.py",
            "tests/app/service/test_views.py",
            # diffs.py's own tests (with the charts of the /ui pages), in process
            "tests/app/api/test_ui_views.py",
        ],
        skip=["neardup/app/service/pgstore.py"],
    ),
    "spark": Package(
        mutate=["neardup/app/spark/*"],
        tests_root="tests/app/spark",
        tests=[
            "tests/app/spark/test_kernels.py",
            "tests/app/spark/test_batches.py",
            "tests/app/spark/test_driver.py",
            "tests/app/spark/test_components.py",
            "tests/app/spark/test_entry.py",
        ],
        # The driver's plan builders (job.py, index.py, corpus.py, components.py, estimates.py)
        # run only in a Spark job: one run of each path (JSON Lines and Parquet in, Parquet
        # out; reasons with a keep policy; --removed and a schema against an index; three index
        # rounds; a bad row; a repeated id). Each mutant's child starts its own local[2]
        # context in the run's one JVM (``shared_jvm``).
        jobs=[
            "tests/app/spark/test_job.py::"
            "test_spark_reads_parquet_globs_and_writes_parquet_like_local",
            "tests/app/spark/test_flags.py::test_spark_keep_longest_equals_local",
            "tests/app/spark/test_flags.py::"
            "test_spark_fields_prefix_and_removed_against_an_index_equal_local",
            "tests/app/spark/test_index.py::"
            "test_spark_rounds_taking_turns_with_the_local_engine_equal_local_rounds",
            "tests/app/spark/test_bad_input.py::"
            "test_spark_bad_row_names_file_and_line_and_writes_nothing"
            '[{"id": "x", "text": "unterminated-not valid JSON]',
            "tests/app/spark/test_bad_input.py::test_spark_repeated_id_is_named",
        ],
        isolation="forkserver",
    ),
}

# Imported at start-up by every Python process of a run (PYTHONPATH names mutants/): a process
# that a test starts while mutmut traces which tests call what ("stats") would look for mutmut's
# settings in its own working directory and fail; only the test process's calls count there.
SITECUSTOMIZE = """import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    os.environ["MUTANT_UNDER_TEST"] = ""
"""

# Generates every mutant (mutmut's first step) without running a test: a sample is drawn from
# the names this writes into the ``.meta`` files.
GENERATE = """from mutmut.__main__ import create_mutants
from mutmut.mutation.trampoline import set_mutant_under_test
from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir, setup_source_paths

set_mutant_under_test("mutant_generation")
copy_src_dir()
copy_also_copy_files()
setup_source_paths()
create_mutants({children})
"""
SAMPLE = "sample.txt"

MUTANT = re.compile(r"`(neardup\.[\w.ǁ]+__mutmut_\d+)`")
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          37: "killed", None: "not checked"}  # fmt: skip


def equivalent_mutants() -> set[str]:
    """The mutant names TRIAGE.md lists under its "Equivalent" headings."""
    names: set[str] = set()
    heading = ""
    for line in TRIAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading = line.lower()
        elif "equivalent" in heading:
            names.update(MUTANT.findall(line))
    return names


def settings(
    name: str,
    package: Package,
    modules: list[str],
    tests: list[str],
    with_postgres: bool,
    with_jobs: bool = False,
) -> str:
    """The ``[tool.mutmut]`` table of one package's run."""
    files = [f"neardup/{m.replace('.', '/')}.py" for m in modules]
    mutate = [f for f in files if any(fnmatch(f, p) for p in package.mutate)] or package.mutate
    tests = [t for t in tests if t.startswith(package.tests_root) or t in package.tests]
    skip = list(package.skip)
    if name == "service" and with_postgres:  # --tests, if given, names the PostgreSQL tests
        tests = tests or [*package.tests, "tests/app/service/test_stores.py",
                          "tests/app/service/test_replicas.py"]  # fmt: skip
        skip = []
    tests = tests or list(package.tests)
    if with_jobs:
        tests += [t for t in package.jobs if t not in tests]
    table = {
        "source_paths": ["neardup/core", "neardup/app"],
        "only_mutate": mutate,
        "do_not_mutate": skip,
        "also_copy": ["neardup/__init__.py", "neardup/__main__.py", "neardup/py.typed", "bench"],
        "pytest_add_cli_args_test_selection": tests,
        "pytest_add_cli_args": ["-p", "no:cacheprovider"],
        "process_isolation": package.isolation,
        "use_git_change_detection": False,
    }
    lines = ["", "[tool.mutmut]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def prepare(name: str, table: str, fresh: bool) -> Path:
    """``.mutation/NAME``: links to the sources, tests and bench, and a pyproject.toml."""
    work = WORK / name
    if fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    for link in ("neardup", "tests", "bench"):
        if not (work / link).is_symlink():
            (work / link).symlink_to(os.path.relpath(ROOT / link, work))
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8") + table
    (work / "pyproject.toml").write_text(text, encoding="utf-8")
    (work / "mutants").mkdir(exist_ok=True)
    (work / "mutants" / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return work


def results(work: Path) -> dict[str, str]:
    """Every mutant's status, from mutmut's ``.meta`` files (only the sample's, if sampled)."""
    statuses: dict[str, str] = {}
    for meta in sorted((work / "mutants").rglob("*.py.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        for mutant, code in data["exit_code_by_key"].items():
            statuses[mutant] = STATUS.get(code, "suspicious")
    sample = work / SAMPLE
    if sample.exists():
        names = sample.read_text(encoding="utf-8").split()
        statuses = {m: statuses.get(m, "not checked") for m in names}
    return statuses


def draw_sample(work: Path, env: dict[str, str], size: int, seed: int, children: int) -> list[str]:
    """Generate the mutants and draw ``size`` of them uniformly (``random.Random(seed)``).

    The kill rate of a uniform sample estimates the package's (``wilson`` gives its interval):
    a package whose every mutant cannot be run in a session is still measured as a whole.
    """
    (work / SAMPLE).unlink(missing_ok=True)
    script = GENERATE.format(children=children)
    subprocess.run([sys.executable, "-c", script], cwd=work, env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    names = sorted(results(work))
    sample = sorted(random.Random(seed).sample(names, min(size, len(names))))
    (work / SAMPLE).write_text("".join(f"{m}\n" for m in sample), encoding="utf-8")
    print(f"sample: {len(sample)} of {len(names)} mutants (seed {seed})", flush=True)
    return sample


def wilson(killed: int, scored: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a kill rate measured on ``scored`` sampled mutants."""
    if not scored:
        return 0.0, 1.0
    p = killed / scored
    centre = (p + z * z / (2 * scored)) / (1 + z * z / scored)
    half = z * math.sqrt(p * (1 - p) / scored + z * z / (4 * scored * scored))
    half /= 1 + z * z / scored
    return max(0.0, centre - half), min(1.0, centre + half)


def summary(
    name: str,
    statuses: dict[str, str],
    seconds: float | None,
    equivalent: set[str],
    sampled: bool = False,
) -> str:
    """One line: killed/total less the equivalent ones, and what the rest were (and, for a
    sample, the 95 % interval of the package's rate)."""
    counts = Counter(statuses.values())
    equal = sum(1 for m, s in statuses.items() if m in equivalent and s != "killed")
    killed = counts["killed"] + counts["timeout"]
    scored = len(statuses) - equal
    rate = 100.0 * killed / scored if scored else 0.0
    rest = ", ".join(f"{counts[s]} {s}" for s in sorted(counts) if s not in ("killed",))
    took = "" if seconds is None else f" in {seconds / 60:.1f} min"
    interval = ""
    if sampled:
        low, high = wilson(killed, scored)
        interval = f" [sample; 95 % interval {100 * low:.1f}-{100 * high:.1f}%]"
    return (
        f"{name}: {rate:.1f}% killed ({killed}/{scored}; {len(statuses)} mutants, "
        f"{equal} equivalent; {rest or 'no other'}){interval}{took}"
    )


def by_module(statuses: dict[str, str], equivalent: set[str]) -> list[str]:
    """``summary``'s line for each module of a run (``neardup.app.service.views: ...``)."""
    modules: dict[str, dict[str, str]] = {}
    for mutant, status in statuses.items():
        module = mutant.rsplit(".", 1)[0]
        modules.setdefault(module, {})[mutant] = status
    return [summary(m, modules[m], None, equivalent) for m in sorted(modules)]


def shared_jvm(env: dict[str, str], cwd: Path) -> Any:
    """A Spark JVM (py4j gateway) for every test process of a run: each mutant's child then
    connects to it (pyspark honours ``PYSPARK_GATEWAY_PORT``) and starts its own context, instead
    of starting a JVM of its own, most of a Spark job test's cost on a busy machine. It is
    started with the run's environment and in ``mutants/``, as mutmut runs the tests (its Python
    workers import the mutants: ``python -m`` puts the working directory first on their path;
    the tests' conftest hands them the mutant's name), and dies with the run."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        from pyspark.java_gateway import launch_gateway

        gateway = launch_gateway(popen_kwargs={"cwd": str(cwd)})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return gateway


def stop_jvm(gateway: Any) -> None:
    """Close the shared JVM's gateway: the JVM exits when its standard input closes."""
    gateway.shutdown()
    gateway.proc.stdin.close()
    try:
        gateway.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        gateway.proc.kill()


def run(name: str, args: argparse.Namespace, equivalent: set[str]) -> str:
    """One package's mutmut run; its survivors written to ``.mutation/NAME/survivors.txt``."""
    package = PACKAGES[name]
    table = settings(name, package, args.modules, args.tests, args.with_postgres, args.with_jobs)
    if args.timeout_multiplier is not None:  # a changed value makes mutmut redo the timeouts
        table += f"timeout_multiplier = {args.timeout_multiplier}\n"
    work = prepare(name, table, fresh=not (args.keep or args.survivors))
    env = {**os.environ, "PYTHONPATH": str(work / "mutants")}
    command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children)]
    if args.sample and not args.survivors:
        sample = draw_sample(work, env, args.sample, args.seed, args.max_children)
        if args.keep:  # a sample grown: the first N draws of a larger one are the N drawn before
            checked = results(work)
            sample = [m for m in sample if checked[m] == "not checked"]
            print(f"{name}: {len(sample)} of them not checked before", flush=True)
        if not sample:  # mutmut runs every mutant when given none
            statuses = results(work)
            line = summary(name, statuses, None, equivalent, sampled=True)
            return "\n    ".join([line, *by_module(statuses, equivalent)])
        command += sample
    elif not args.survivors:
        (work / SAMPLE).unlink(missing_ok=True)
    if args.survivors:  # mutmut copies tests/ again and traces the new tests only
        modules = tuple(f"neardup.{m}." for m in args.modules) or ("neardup.",)
        again = sorted(m for m, s in results(work).items()  # not TRIAGE.md's equivalent ones
                       if s in ("survived", "no tests") and m.startswith(modules)
                       and m not in equivalent)  # fmt: skip
        if not again:  # given no name, mutmut would run every mutant
            return summary(name, results(work), None, equivalent, (work / SAMPLE).exists())
        command += again
    log = work / "mutmut.log"
    print(f"{name}: mutmut in {work.relative_to(ROOT)} (log: {log.relative_to(ROOT)})", flush=True)
    start = time.monotonic()
    shared = args.with_postgres and name == "service"
    server = PostgresServer(fsync=False).start() if shared else None
    gateway = shared_jvm(env, work / "mutants") if name == "spark" and args.with_jobs else None
    if gateway is not None:
        connection = getattr(gateway, "java_parameters", None) or gateway.gateway_parameters
        env["PYSPARK_GATEWAY_PORT"] = str(connection.port)
        env["PYSPARK_GATEWAY_SECRET"] = str(connection.auth_token)
    try:
        if server is not None:  # one server for every mutant's tests (the fixture attaches)
            env[SHARED] = server.address()
        with log.open("w", encoding="utf-8") as out:
            done = subprocess.run(command, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
    finally:
        if server is not None:
            server.destroy()
        if gateway is not None:
            stop_jvm(gateway)
    seconds = time.monotonic() - start
    statuses = results(work)
    survivors = sorted(m for m, s in statuses.items() if s != "killed" and s != "timeout")
    (work / "survivors.txt").write_text(
        "".join(f"{statuses[m]}\t{m}{'  (equivalent)' if m in equivalent else ''}\n"
                for m in survivors),
        encoding="utf-8",
    )  # fmt: skip
    line = summary(name, statuses, seconds, equivalent, sampled=(work / SAMPLE).exists())
    if done.returncode != 0:
        line += f" [mutmut exited {done.returncode}: see the log]"
    print(line, flush=True)
    return "\n    ".join([line, *by_module(statuses, equivalent)])


def main() -> int:
    """Run the packages asked for (all three by default) and print one line each."""
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=main.__doc__)
    parser.add_argument("--package", nargs="+", choices=list(PACKAGES), default=list(PACKAGES))
    parser.add_argument(
        "--modules", nargs="+", default=[],
        help="mutate only these modules of their packages (e.g. core._text app.service.pool)",
    )  # fmt: skip
    parser.add_argument(
        "--tests", nargs="+", default=[],
        help="run only these of the package's tests (e.g. tests/app/spark/test_kernels.py)",
    )  # fmt: skip
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", action="store_true", help="reuse .mutation/ (mutmut's cache)")
    parser.add_argument(
        "--survivors", action="store_true",
        help="reuse .mutation/ and run again only the mutants that survived or had no test "
        "(but those TRIAGE.md lists as equivalent)",
    )  # fmt: skip
    parser.add_argument(
        "--report", action="store_true", help="print the last run's figures; run nothing"
    )
    parser.add_argument(
        "--sample", type=int, default=0, metavar="N",
        help="run N mutants drawn uniformly from the package's (or --modules') and print the "
        "kill rate with its 95 %% interval: a whole package measured in a fraction of the time; "
        "with --keep and the same --seed, a larger N runs only the mutants not checked before",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="--sample's random seed")
    parser.add_argument(
        "--with-postgres", action="store_true",
        help="service: add pgstore.py and its PostgreSQL tests (--tests names them, else "
        "test_stores.py and test_replicas.py), all on one PostgreSQL server started for the run",
    )  # fmt: skip
    parser.add_argument(
        "--with-jobs", action="store_true",
        help="spark: add a few Spark job tests (the plan builders' only tests), on one shared JVM",
    )  # fmt: skip
    parser.add_argument(
        "--timeout-multiplier", type=float, default=None,
        help="mutmut's (default 15): a mutant's tests get (their time + 1 s) times this of wall "
        "time; raise it on a busy machine, where a starved nice-19 child otherwise 'times out'",
    )  # fmt: skip
    args = parser.parse_args()
    equivalent = equivalent_mutants()
    start = time.monotonic()
    if args.report:
        lines = []
        for name in args.package:
            statuses = results(WORK / name)
            sampled = (WORK / name / SAMPLE).exists()
            lines.append("\n    ".join([summary(name, statuses, None, equivalent, sampled),
                                        *by_module(statuses, equivalent)]))  # fmt: skip
    else:
        lines = [run(name, args, equivalent) for name in args.package]
    print("\nmutation testing, kill rate per package (TRIAGE.md: the survivors)")
    for line in lines:
        print("  " + line)
    print(f"  total: {(time.monotonic() - start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
