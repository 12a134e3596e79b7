"""Every command-line option, once: its type, default and help (the guide's command reference is generated
from these, ``reference.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kerneltune.tuning.strategies import names as strategy_names

KERNEL_HELP = ("A registered kernel (ranker-attention, drafter-wide, peer-exchange) or your own: "
               "path/to/file.py[:ATTR] or package.module:ATTR.")

Kernel = Annotated[str, typer.Argument(help=KERNEL_HELP, show_default=False)]

# sweep
Space = Annotated[Path | None, typer.Option(
    help="Search-space TOML. Default: the kernel's own space (a kerneltune.Kernel's params and buckets), else "
         "search_spaces/KERNEL.toml, else KERNEL.toml beside the kernel's module.")]
Bucket = Annotated[list[str] | None, typer.Option(
    help="Sweep only this bucket (repeatable): a bucket's name, or a problem as key=value,... (a Triton "
         "kernel's key values pick its recorded calls).")]
FromLedger = Annotated[bool, typer.Option(
    help="Sweep the problems the miss ledger recorded that no tuned entry of their own served, the most called "
         "first (record them: KERNELTUNE_RECORD=1).")]
LedgerPath = Annotated[Path | None, typer.Option(
    help="The miss ledger: a ledger file, or a folder of them (default: ledger/ in the user's cache, "
         "$KERNELTUNE_CACHE or ~/.cache/kerneltune).")]
Top = Annotated[int | None, typer.Option(help="With --from-ledger: only the N most called buckets.")]
Strategy = Annotated[str, typer.Option(help=f"One of: {', '.join(strategy_names())}.")]
Budget = Annotated[int | None, typer.Option(help="Candidates to measure per bucket (default: all).")]
Seed = Annotated[int, typer.Option(help="Seed of the sampler and of the inputs.")]
Contenders = Annotated[Path | None, typer.Option(
    help="A tuned table: time only the configs it holds for each bucket (winner, runner-ups, fallbacks), as after "
         "a kernel change made it stale; without --bucket, every bucket it holds (the space's, and those a "
         "--from-ledger sweep added); exhaustive only.")]
WarmStart = Annotated[bool, typer.Option(
    help="First measure the winners and runner-ups of the nearest tuned buckets on this device kind, then search.")]
Gpus = Annotated[str, typer.Option(
    help="Comma-separated GPU indices: one timing worker per GPU, or per launch group of a multi-GPU kernel "
         "(default: as many as one launch spans).")]
Out = Annotated[Path, typer.Option(
    help="Working folder of the journals, tables and logs; its tables reach the runtime only through "
         "`kerneltune install`.")]
Replay = Annotated[Path | None, typer.Option(
    help="Answer from a recorded journal, or a folder of per-worker journals; no GPU needed.")]
Storage = Annotated[str | None, typer.Option(
    help="Optuna RDB URL (e.g. postgresql://user@host/db) shared by workers: an exhaustive sweep becomes a queue "
         "they share.")]
Study = Annotated[str | None, typer.Option(help="Optuna study name prefix (with --storage).")]
Worker = Annotated[str | None, typer.Option(help="This worker's name: its journal is NAME-MODE-WORKER.jsonl.")]
Heartbeat = Annotated[float, typer.Option(help="Seconds between a shared trial's heartbeats; 3 missed = dead.")]
ReplaySeconds = Annotated[float, typer.Option(
    help="With --replay: pause this long per candidate, as a run would (demos, tests of shared studies).")]
CompileOnly = Annotated[bool, typer.Option(
    help="Compile offline and rank by static metrics, no timings (kernels that have it: drafter-wide).")]
Resume = Annotated[bool, typer.Option(
    help="Keep what the journal holds for this kernel source, problem and inputs (records of another source are "
         "measured again, and counted); --no-resume sets the old journal aside and starts afresh.")]
Playoff = Annotated[bool, typer.Option(
    help="Before a bucket's entry is written, time its leaders (within the best's noise or 3%, at most 5) again in "
         "interleaved rounds (10, up to 40 while undecided) and decide the winner on paired ratios; --no-playoff "
         "keeps the sequential medians.")]
EarlyStop = Annotated[bool, typer.Option(
    help="Stop timing a candidate once it is --early-stop-factor times the bucket's best so far beyond its own noise "
         "(journaled as stopped early; a batch too noisy to say so is timed on); --no-early-stop times every "
         "candidate to the noise rule.")]
EarlyStopFactor = Annotated[float, typer.Option(
    help="How many times the bucket's best so far a candidate's first batches must be, beyond their own noise, to "
         "stop it early (above 1).")]
Journal = Annotated[Path | None, typer.Option(help="Journal file (default: OUT/journals/NAME-MODE.jsonl).")]
CompileWorkers = Annotated[int | None, typer.Option(
    help="Compile workers beside each timing worker (processes where the kernel's build can leave its process, "
         "else threads); 0 compiles each candidate when it is timed. Default: the cores less two, up to 14.")]
RelNoise = Annotated[float, typer.Option(help="Stop timing when the median's 95% CI half-width is under this.")]
MaxSeconds = Annotated[float, typer.Option(help="Time cap of sampling per candidate.")]
ColdL2 = Annotated[bool, typer.Option(help="Flush L2 before every timed call.")]
CompileTimeout = Annotated[float, typer.Option(help="Seconds a candidate may take to compile; a hang there is killed "
                                                    "then and journaled as a compile timeout.")]
RunTimeout = Annotated[float, typer.Option(help="Seconds a candidate may take to verify and time, counted from the "
                                                "end of its compile; a hang there is killed then and journaled as "
                                                "a timeout of its check or timing.")]

# verify
Table = Annotated[Path | None, typer.Option(
    help="Tuned table (default: the tables the runtime reads for this device, the user's and the shipped one; on "
         "a machine without the kernel's GPU, every shipped table, checked as far as it can be here).")]
Emulate = Annotated[bool, typer.Option(
    help="Check the kernel's launch in its CPU emulation instead (kernels that have one: drafter-wide).")]
Interpret = Annotated[bool, typer.Option(
    help="Run the kernel's own compiled program in the CPU interpreter on its small shapes instead "
         "(drafter-wide), its steps in worker processes, one a core (KERNELTUNE_INTERPRET_WORKERS=N to change "
         "that).")]
Interleavings = Annotated[int | None, typer.Option(
    min=1, help="With --interpret: the schedules each arch's step runs in, the fixed order first, then PCT and random "
                "ones in turn, each named in its check as (kind, seed) to run again. Default: the kernel's own.")]
VerifyBucket = Annotated[list[str] | None, typer.Option(help="Check only this bucket's entry (repeatable).")]
RequireTiming = Annotated[bool, typer.Option(
    help="Time and judge speed even where this machine's times say nothing of it (a Triton or Pallas kernel in "
         "its interpreter on the CPU: by default correctness only, exit 2).")]
Junit = Annotated[Path | None, typer.Option(
    help="Also write JUnit XML here: one test case per entry and fallback (passed, failed with the figures, or "
         "skipped with the reason), for CI systems to show.")]

# install, rekey
Tables = Annotated[list[Path], typer.Argument(
    help="Tables a live sweep wrote (OUT/tables/<device-kind>/<kernel>.json).", show_default=False)]
To = Annotated[Path | None, typer.Option(
    help="Tables folder to install into (default: the user's, $KERNELTUNE_TABLES or the per-user data folder; a "
         "maintainer gives kerneltune/tables/shipped to ship them).")]
RekeyTables = Annotated[list[Path] | None, typer.Option(
    help="Tuned table (repeatable; default: every table of the kernel the runtime may read, the user's "
                    "and the shipped ones, for every device kind).")]

# report
Results = Annotated[Path | None, typer.Argument(help="A journal, or a folder searched for journals.",
                                                show_default=False)]
Ledger = Annotated[bool, typer.Option(
    help="Report the miss ledger's coverage instead: the share of recorded calls served by a tuned entry, a "
         "neighbour, a fallback or the heuristic, under each state of the tables they met.")]
Csv = Annotated[Path | None, typer.Option(help="Write one CSV row per candidate here, ranked per bucket and kernel "
                                                "source (rank 1 the fastest; failures after, unranked); with "
                                                "--ledger, one row per period.")]
Html = Annotated[Path | None, typer.Option(help="Write a self-contained HTML report here.")]
Baseline = Annotated[Path | None, typer.Option(help="A tuned table (or folder) to compare each bucket with.")]
BenchResult = Annotated[Path | None, typer.Option(
    help="A `kerneltune bench` result JSON: its target verdicts, and a section of the HTML report.")]

# bench
Shapes = Annotated[Path | None, typer.Option(
    help="Shapes TOML (default: the kernel's standard shapes in search_spaces/).")]
Baselines = Annotated[str | None, typer.Option(
    help="Comma-separated baselines (default: every one the kernel declares).")]
BenchOut = Annotated[Path, typer.Option(help="Folder of the results JSON (DATE-DEVICE.json).")]
BenchResume = Annotated[bool, typer.Option(
    help="Continue today's results JSON: the shapes it holds are kept, not run again; refused if it "
                     "was measured on another system or kernel source.")]

DEFAULT_OUT = Path("kerneltune-out")
DEFAULT_BENCH_OUT = Path("kerneltune-out/bench")
