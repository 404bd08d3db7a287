"""``kserve-runbook``: parse the command line and delegate (docs/contracts.md#cli).

Exit codes: 0 ran with no critical finding; 1 ran with at least one critical
finding; 2 could not run (the message says why, on one line, no traceback).
``demo`` and ``scenarios run`` exit 0 whenever the report was written.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
from click.core import ParameterSource

from nbhelpers import __version__
from nbhelpers.cli.whatif import whatif
from nbhelpers.errors import RunbookError
from nbhelpers.render.symptoms import SYMPTOM_BY_KEY

if TYPE_CHECKING:
    from nbhelpers.cli.fleet import FleetResult

F = TypeVar("F", bound=Callable[..., Any])


def _target_options(function: F) -> F:
    function = click.option("--llmisvc", default="", help="Name of the LLMInferenceService (instead of --isvc).")(
        function
    )
    function = click.option("--isvc", default="", help="Name of the InferenceService.")(function)
    return click.option("--namespace", "-n", default="", help="Namespace of the InferenceService.")(function)


def _window_options(function: F) -> F:
    options = [
        click.option("--since", default="", help="Window length back from now (or the capture time), e.g. 2h."),
        click.option("--start", default="", help="Window start, ISO 8601 with offset."),
        click.option("--end", default="", help="Window end, ISO 8601 with offset."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _live_options(function: F) -> F:
    """How to reach the cluster and Prometheus (kubeconfig, context, Prometheus URL and auth, timeouts)."""
    options = [
        click.option("--kubeconfig", default="", help="Kubeconfig file (default: the usual kubeconfig rules)."),
        click.option("--context", default="", help="Kubeconfig context."),
        click.option("--prometheus", default="", help="Prometheus base URL, e.g. http://127.0.0.1:9090."),
        click.option("--prometheus-token-env", default="", help="Environment variable holding a bearer token."),
        click.option("--prometheus-ca-file", default="", help="CA bundle for Prometheus TLS."),
        click.option(
            "--prometheus-header", "prometheus_headers", multiple=True, help="Extra header 'Name: value' (repeatable)."
        ),
        click.option("--prometheus-insecure", is_flag=True, help="Do not verify Prometheus' TLS certificate."),
        click.option("--request-timeout", default="30s", show_default=True, help="Timeout of each API call."),
        click.option(
            "--client-timeout", default="", help="The callers' own request timeout, e.g. 60s (timeouts step)."
        ),
        click.option("--kserve-namespace", default="kserve", show_default=True, help="Where KServe's config lives."),
        click.option(
            "--knative-namespace", default="knative-serving", show_default=True, help="Where Knative's config lives."
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _report_options(function: F) -> F:
    options = [
        click.option("--bundle", default="", help="Evidence bundle (directory or .tar.gz) instead of a live cluster."),
        click.option("--incident-start", default="", help="Incident start (shaded in charts, used in the timeline)."),
        click.option("--incident-end", default="", help="Incident end."),
        click.option("--out", default="", help="Output folder (must be new or empty)."),
        click.option("--deadline", default="", help="Overall time limit for the run, e.g. 300s."),
        click.option("--ignore", multiple=True, help="Report this finding code as info (repeatable)."),
        click.option("--quiet", "-q", is_flag=True, help="No progress output."),
        click.option(
            "--no-report",
            is_flag=True,
            help="Stop after the verdict: findings.json, summary.md and evidence.tar.gz, no notebook or HTML.",
        ),
        FAIL_ON_PARTIAL,
    ]
    for option in reversed(options):
        function = option(function)
    return function


FAIL_ON_PARTIAL = click.option(
    "--fail-on-partial",
    is_flag=True,
    help="Exit 1, with the reason on stderr, when the run could not see everything (partial: true), "
    "even if nothing critical was found: for automation that must not mistake blindness for health.",
)


def _fail_if_partial(options: dict[str, Any], partial: bool, reason: str) -> None:
    """With --fail-on-partial, a partial run exits 1 (exit 2 stays for runs that could not start: docs/contracts.md#cli)."""
    if partial and options.get("fail_on_partial"):
        click.echo(f"kserve-runbook: partial result (--fail-on-partial): {terminal_safe(reason)}", err=True)
        sys.exit(1)


def _params(options: dict[str, Any]) -> Any:
    """The CLI's options as a TriageParams: durations and times are parsed here, once."""
    from nbhelpers.triage import TEXT_PARAMETERS, params_from_text

    return params_from_text({name: value for name, value in options.items() if name in TEXT_PARAMETERS})


def _run_report(options: dict[str, Any], always_zero: bool = False) -> None:
    """Verdict first: read once and run the nine steps in-process, write findings.json and summary.md, print
    the verdict, then write the evidence bundle; only then render the report notebook from that bundle."""
    import time

    from nbhelpers.cli import headless
    from nbhelpers.findings.catalog import Severity
    from nbhelpers.render.summary import coverage_line
    from nbhelpers.triage import run

    began = time.monotonic()
    params = _params(options)
    show_progress = not options.get("quiet") and sys.stderr.isatty()
    progress = (lambda _event, message: click.echo(terminal_safe(f"  {message}"), err=True)) if show_progress else None
    result = run(params, progress)
    target = result.evidence.target
    out_dir = headless.output_dir(options.get("out") or None, target, datetime.now(timezone.utc))
    headless.write_findings(result, out_dir)
    critical = sum(1 for finding in result.findings if finding.level is Severity.CRITICAL)
    coverage = coverage_line(result)
    click.echo(terminal_safe(coverage))
    click.echo(terminal_safe(f"root causes: {', '.join(result.root_causes) or 'none'} ({critical} critical findings)"))
    click.echo(f"findings: {out_dir / 'findings.json'}")
    sys.stdout.flush()
    bundle = headless.write_evidence(result, out_dir)  # after the verdict: compressing it takes a while
    if not options.get("no_report"):
        left = params.deadline.total_seconds() - (time.monotonic() - began) if params.deadline else None
        symptom = options.get("symptom") or ""
        problem = headless.render_report(result, params, out_dir, bundle, left, symptom)
        if problem:
            click.echo(terminal_safe(f"report: not rendered ({problem}); the verdict is in {out_dir / 'summary.md'}"))
        else:
            click.echo(f"report: {out_dir / 'report.html'}")
    _fail_if_partial(options, result.partial, coverage)
    sys.exit(0 if always_zero or not result.has_critical else 1)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kserve-runbook")
def cli() -> None:
    """Diagnose vLLM on KServe: 503s, 504s, GPU OOM, autoscaling that does not scale."""


@cli.command()
@_target_options
@_live_options
@_window_options
@_report_options
@click.option(
    "--symptom",
    type=click.Choice(list(SYMPTOM_BY_KEY), case_sensitive=False),
    default=None,
    help="What users report: the report then names the steps to read first (all nine run anyway).",
)
def triage(**options: Any) -> None:
    """Triage one InferenceService: the verdict first (findings.json, summary.md, evidence.tar.gz), then the
    report (triage.ipynb and report.html, rendered from that evidence)."""
    _run_report(options)


@cli.command()
@_target_options
@_live_options
@_window_options
@click.option("--bundle", default="", help="Re-capture from an existing bundle (e.g. to narrow the window).")
@click.option("--out", required=True, help="Bundle to write: a new directory, or a path ending in .tar.gz.")
@FAIL_ON_PARTIAL
def capture(**options: Any) -> None:
    """Write an evidence bundle (secrets redacted) to re-run the triage offline."""
    from nbhelpers.evidence.capture import write_bundle
    from nbhelpers.triage import collect

    destination = Path(options["out"])
    if destination.exists() and (destination.is_file() or any(destination.iterdir())):
        raise RunbookError(f"--out {destination} exists and is not empty: choose a new path")
    evidence = collect(_params(options))
    written = write_bundle(evidence, destination, evidence.observed_at)
    failed = evidence.failures()
    click.echo(f"bundle: {written} ({len(failed)} reads failed; see manifest.json)")
    listed = ", ".join(f"{record.status} on {record.what}" for record in failed[:5])
    _fail_if_partial(options, bool(failed), f"{len(failed)} reads failed: {listed}")


@cli.group("fleet", invoke_without_command=True)
@click.option(
    "--namespace", "-n", default="", help="Namespace whose InferenceServices and LLMInferenceServices to triage."
)
@_live_options
@_window_options
@click.option("--all-namespaces", "-A", is_flag=True, help="Every namespace (one cluster-wide list).")
@click.option("--out", default="", help="Output folder (must be new or empty).")
@click.option("--notebooks", is_flag=True, help="Also run the notebook per service (report.html, triage.ipynb).")
@click.option("--deadline", default="", help="Overall time limit, e.g. 30m: services not reached are listed as such.")
@click.option(
    "--shard",
    default="",
    help="I/N: triage only part I of N (I counts from 0, like JOB_COMPLETION_INDEX); "
    "N runs cover every service once. Join them with 'fleet merge'.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@FAIL_ON_PARTIAL
@click.pass_context
def fleet_command(context: click.Context, /, **options: Any) -> None:
    """Triage every InferenceService and LLMInferenceService of a namespace (or all): files per service, fleet.md worst first.

    'fleet merge DIR... --out DIR' joins the folders of sharded runs into one index."""
    if context.invoked_subcommand is not None:
        given = [name for name in options if context.get_parameter_source(name) == ParameterSource.COMMANDLINE]
        if given:
            option = given[0].replace("_", "-")
            raise RunbookError(f"fleet {context.invoked_subcommand} takes its own options: drop --{option}")
        return
    from nbhelpers.cli.fleet import FleetRequest, parse_shard, run_fleet

    show_progress = not options["quiet"] and sys.stderr.isatty()
    request = FleetRequest(
        triage=_params(options),
        all_namespaces=options["all_namespaces"],
        out=options["out"],
        notebooks=options["notebooks"],
        progress=(lambda message: click.echo(terminal_safe(message), err=True)) if show_progress else None,
        shard=parse_shard(options["shard"]),
    )
    result = run_fleet(request)
    _fleet_outcome(result, options)


def _fleet_outcome(result: FleetResult, options: dict[str, Any]) -> NoReturn:
    """Where the index is, the totals, and the exit code of a fleet run or merge."""
    from nbhelpers.cli.fleet import service_count

    totals = result.totals()
    click.echo(f"fleet: {result.out_dir / 'fleet.md'}")
    click.echo(
        f"{service_count(result)}: {totals['critical']} critical, {totals['error']} not triaged, "
        f"{totals['warning']} warning only, {totals['partial']} partial"
    )
    blind = totals["partial"] + totals["error"]
    reason = f"{blind} service(s) not fully seen"
    if result.gaps:  # a kind that could not be listed; fleet merge: folders missing, shards absent ...
        reason += f" and {len(result.gaps)} gap(s) in the listing or the merge"
    _fail_if_partial(options, blind > 0 or bool(result.gaps), f"{reason}; see {result.out_dir / 'fleet.md'}")
    sys.exit(result.exit_code)


@fleet_command.command("merge")
@click.argument("folders", nargs=-1, required=True, type=click.Path(file_okay=True, dir_okay=True))
@click.option("--out", required=True, help="Where the merged fleet.json, fleet.md and fleet.html go.")
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@FAIL_ON_PARTIAL
def fleet_merge_command(**options: Any) -> None:
    """Join the folders of 'fleet --shard I/N' runs into one index (fleet.json, fleet.md, fleet.html)."""
    from nbhelpers.cli.fleet_merge import MergeRequest, run_merge

    show_progress = not options["quiet"] and sys.stderr.isatty()
    request = MergeRequest(
        folders=tuple(options["folders"]),
        out=options["out"],
        progress=(lambda message: click.echo(terminal_safe(message), err=True)) if show_progress else None,
    )
    _fleet_outcome(run_merge(request), options)


@cli.command("webhook")
@click.option("--listen", default="127.0.0.1:9095", show_default=True, help="HOST:PORT (POST /alerts, GET /healthz).")
@_live_options
@click.option("--out", default="outputs", show_default=True, help="Each run writes <out>/<UTC time>-<ns>-<isvc>/.")
@click.option("--lookback", default="30m", show_default=True, help="Each window starts this long before startsAt.")
@click.option("--cooldown", default="10m", show_default=True, help="Do not triage one service again within this.")
@click.option("--deadline", default="5m", show_default=True, help="Time limit of each run.")
@click.option("--secret-env", default="", help="Variable holding the bearer secret Alertmanager must send.")
@click.option("--insecure-no-auth", is_flag=True, help="Allow a non-loopback --listen without --secret-env.")
@click.option("--slack-webhook-env", default="", help="Variable holding a Slack incoming-webhook URL to notify.")
@click.option(
    "--reports",
    type=click.Choice(["none", "html"]),
    default="none",
    show_default=True,
    help="html: after the verdict, also render report.html from the run's evidence bundle.",
)
@click.option("--public-url", default="", help="The receiver's URL as browsers reach it: notifications link there.")
@click.option(
    "--keep", type=click.IntRange(min=0), default=0, show_default=True, help="Keep the newest N runs (0: all)."
)
@click.option(
    "--keep-days",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    help="Remove runs older than this (0: never).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
def webhook_command(**options: Any) -> None:
    """Alertmanager receiver: triage the InferenceService each firing alert names; serves the report index on GET /."""
    import os

    from nbhelpers.cli.webhook import run_receiver, settings_from_options

    settings = settings_from_options(_params(options), options, os.environ)
    # Progress goes to a copy of stderr: rendering a report points file descriptor 2 at the kernel's log.
    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    say = None if options["quiet"] else lambda message: click.echo(terminal_safe(message), file=terminal)
    try:
        run_receiver(settings, say)
    finally:
        terminal.close()


@cli.command()
@click.option("--out", default="", help="Output folder (must be new or empty).")
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
def demo(out: str, quiet: bool) -> None:
    """Triage the bundled default scenario (no cluster needed)."""
    from nbhelpers.scenarios import DEFAULT_SCENARIO

    _run_scenario(DEFAULT_SCENARIO, out, quiet)


@cli.group()
def scenarios() -> None:
    """Bundled incident scenarios that run with no cluster."""


@scenarios.command("list")
def scenarios_list() -> None:
    """List the scenarios: name, symptom, difficulty, and the public report a scenario is built on."""
    from nbhelpers.scenarios import list_scenarios

    specs = list_scenarios()
    width = max((len(spec.name) for spec in specs), default=0)
    for spec in specs:
        line = f"{spec.name:<{width}}  {spec.symptom:<16} {spec.difficulty:<12} {spec.source}"
        click.echo(line.rstrip())


@scenarios.command("run")
@click.argument("name")
@click.option("--out", default="", help="Output folder (must be new or empty).")
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
def scenarios_run(name: str, out: str, quiet: bool) -> None:
    """Run the triage on one scenario's bundle."""
    _run_scenario(name, out, quiet)


@scenarios.command("quiz")
@click.argument("name", required=False)
@click.option("--seed", default=0, show_default=True, type=int, help="Orders the choices (and picks NAME if unset).")
@click.option("--answer", default=None, type=int, help="Answer with this choice number instead of asking.")
def scenarios_quiz(name: str | None, seed: int, answer: int | None) -> None:
    """Training: read the symptom and the evidence, pick the root cause, get the explanation."""
    from nbhelpers import training

    question = training.question_for(name or training.pick_scenario(seed), seed)
    click.echo(training.question_text(question))
    click.echo(training.choices_text(question))
    if answer is None:
        try:
            answer = click.prompt("Your answer", type=click.IntRange(1, len(question.choices)))
        except click.exceptions.Abort:
            raise RunbookError("no answer read from the terminal; pass --answer N to answer without one") from None
    try:
        verdict = training.check_answer(question, answer)
    except ValueError as error:
        raise RunbookError(str(error)) from None
    click.echo(f"\n{verdict.message}\n")
    click.echo(training.reveal_text(question))


def _run_scenario(name: str, out: str, quiet: bool) -> None:
    from nbhelpers.scenarios import scenario_bundle

    bundle = scenario_bundle(name)
    _run_report({"bundle": str(bundle), "out": out, "quiet": quiet}, always_zero=True)


@cli.command()
@click.argument("code", required=False)
def codes(code: str | None) -> None:
    """The finding-code reference: meaning, why, how to fix, evidence read, cause edges."""
    from nbhelpers.render import code_reference

    if code:
        click.echo(code_reference.reference_text(code))
        return
    for entry in code_reference.all_references():
        click.echo(code_reference.catalog_line(entry))


@cli.command()
@click.option(
    "--model", default="", help="Hugging Face id from the shipped table, e.g. meta-llama/Llama-3.1-8B-Instruct."
)
@click.option("--model-config", default="", help="A Hugging Face config.json (explicit head_dim wins).")
@click.option(
    "--gpu-memory",
    default="",
    help="Memory per GPU as vLLM logs it (total_gpu_memory): 23.58GiB (2^30 bytes) or 24GB (10^9).",
)
@click.option("--gpu", default="", help="GPU model from the shipped table, e.g. H100-80GB, A100-40GB, L4.")
@click.option("--tensor-parallel-size", "-tp", default=1, show_default=True, type=int)
@click.option("--pipeline-parallel-size", "-pp", default=1, show_default=True, type=int)
@click.option("--gpu-memory-utilization", default=0.9, show_default=True, type=float)
@click.option("--dtype", default="auto", show_default=True, help="Weights dtype (auto follows the model).")
@click.option("--kv-cache-dtype", default="auto", show_default=True, help="auto, fp8, fp8_e4m3, fp8_e5m2 ...")
@click.option("--max-model-len", default=None, type=int, help="Default: the model's max_position_embeddings.")
@click.option("--max-num-seqs", default=None, type=int, help="Default: vLLM's default for the GPU and version.")
@click.option("--max-num-batched-tokens", default=None, type=int, help="Default: vLLM's default (sizes activations).")
@click.option("--block-size", default=16, show_default=True, type=int)
@click.option("--weights-gib", default=None, type=float, help="Weights per GPU, from 'Model loading took X GiB'.")
@click.option("--available-kv-gib", default=None, type=float, help="From 'Available KV cache memory: X GiB' (exact).")
@click.option("--vllm-version", default="", help="vLLM version (defaults move with it), e.g. 0.10.1.")
@click.option("--target-concurrency", default=None, type=int, help="Full-length requests that must fit at once.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the keys of the JSON contract (docs/contracts.md#kv-cache-calculator).",
)
def kvcache(**options: Any) -> None:
    """vLLM's KV cache for a model on a GPU: tokens, concurrency at full context, whether it fits, flags."""
    import json

    from nbhelpers.cli import kvcache

    report = kvcache.run(options)
    if options["as_json"]:
        click.echo(json.dumps(report.contract_json(), indent=2))
    else:
        click.echo(kvcache.render(report))


cli.add_command(whatif)


def main() -> None:
    """Console entry point: exit 2 with one line on stderr for anything that stops a run.

    Exit 1 is kept for "ran and found something critical" (automation reads it so), which is why an
    unexpected error is not left to Python's default exit 1 with a traceback: its trace goes to a
    debug log file named in the one-line message.
    """
    try:
        cli.main(standalone_mode=False)
    except RunbookError as error:
        _fail(str(error))
    except click.exceptions.Abort:
        _fail("aborted", prefix="")
    except click.ClickException as error:
        _fail(error.format_message())
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as error:  # a bug, or input nothing checked: never a traceback on the terminal
        log = _debug_log(error)
        _fail(f"unexpected {type(error).__name__}: {error} (trace in {log}; please report it)")


def terminal_safe(text: str) -> str:
    """One line without control characters: cluster strings can carry ANSI escapes and newlines."""
    lines = (line.strip() for line in str(text).splitlines() if line.strip())
    joined = "; ".join(lines)
    return "".join(char if char.isprintable() else "?" for char in joined)


def _fail(message: str, prefix: str = "error: ") -> NoReturn:
    from nbhelpers.util.redaction import redact_text

    click.echo(f"kserve-runbook: {prefix}{terminal_safe(redact_text(message))}", err=True)
    sys.exit(2)


def _debug_log(error: BaseException) -> Path:
    import tempfile
    import traceback

    handle, name = tempfile.mkstemp(prefix="kserve-runbook-error-", suffix=".log")
    with os.fdopen(handle, "w", encoding="utf-8") as log:
        log.write("".join(traceback.format_exception(error)))
    return Path(name)
