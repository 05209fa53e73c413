"""The `query`, `phase`, `report`, `seeds`, `heads` and `dashboard` subcommands, registered on the
`sweeper` command's parser.

`register(subparsers)` adds them; each sets `func(args) -> int`. Bad input (an unknown column,
a malformed where or SQL, a bad threshold) prints one line on stderr and returns 2.
`python -m analysis ...` runs the same subcommands without the rest of sweeper.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path

from sweeper.numbers import MAX_SEED, int_argument
from sweeper.results.errors import (
    OneLineParser,
    ResultsInputError,
    ResultsWriteError,
    closed_pipe_exit,
    command_line,
    one_line,
)
from sweeper.results.files import write_whole_file
from sweeper.results.location import (
    DEFAULT_RESULTS,
    SWEEP_FORMS,
    SweepLocation,
    is_sweep_file,
    locate_sweep,
)
from sweeper.results.outcomes import Thresholds
from sweeper.results.schema import resolve_column
from sweeper.results.words import count

from .errors import AnalysisInputError
from .load import load
from .query import DEFAULT, FORMATS, format_frame, query_frame, sql

SWEEP_HELP = SWEEP_FORMS


def _one_line_errors(func: Callable[[argparse.Namespace], int]):
    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            with command_line():  # input errors name the flags (`sweeper.results.errors`)
                return func(args)
        except ResultsInputError as exc:  # AnalysisInputError and the contract's own
            print(f"sweeper {args.analysis_command}: error: {one_line(str(exc))}",
                  file=sys.stderr)
            return 2
        except ResultsWriteError as exc:  # an output on a full disk or a read-only folder
            print(f"sweeper {args.analysis_command}: error: {exc}", file=sys.stderr)
            return 1
    return run


def _columns(text: str | None) -> list[str] | None:
    if text is None:
        return None
    columns = [c.strip() for c in text.split(",") if c.strip()]
    if not columns:
        raise AnalysisInputError("--columns: give comma-separated column names")
    return columns


def _facet(text: str) -> str | None:
    return None if text.lower() == "none" else text


def _add_threshold_options(p: argparse.ArgumentParser) -> None:
    """The outcome thresholds as options, their defaults the results package's (`Thresholds`)."""
    default = Thresholds()
    p.add_argument("--threshold", type=float, default=default.accuracy,
                   help=f"accuracy at which a trial counts as learned (default {default.accuracy})")
    p.add_argument("--attention-learned-threshold", type=float,
                   default=default.attention_learned,
                   help="attn_acc at which a trial's attention counts as learned "
                        f"(default {default.attention_learned})")
    p.add_argument("--attention-threshold", type=float, default=default.attention,
                   help=f"attn_acc for the attention onset (default {default.attention})")
    p.add_argument("--ktiw-threshold", type=float, default=default.ktiw,
                   help=f"ktiw_acc for the KTIW onset (default {default.ktiw})")
    p.add_argument("--concentration-threshold", type=float, default=default.concentration,
                   help="peak attention mass, in multiples of uniform's 1/S, from which a "
                        "head's attention counts as concentrated (copy's regime; default "
                        f"{default.concentration:g})")


def _thresholds(args: argparse.Namespace) -> Thresholds:
    return Thresholds(accuracy=args.threshold, attention=args.attention_threshold,
                      ktiw=args.ktiw_threshold,
                      attention_learned=args.attention_learned_threshold,
                      concentration=args.concentration_threshold)


def _add_sweep(p: argparse.ArgumentParser) -> None:
    """The sweep every reading command takes, named one way (`locate_sweep`), and --results."""
    p.add_argument("sweep_dir", metavar="SWEEP", help=SWEEP_HELP)
    p.add_argument("--results", help="the results root a sweep name is under (default: the "
                                     f"sweep file's, else {DEFAULT_RESULTS})")


def _located(args: argparse.Namespace, target: str | None = None,
             argument: str = "SWEEP") -> SweepLocation:
    return locate_sweep(args.sweep_dir if target is None else target, args.results, argument)


def _load(args: argparse.Namespace, **kwargs):
    where = _located(args)
    return load(where.results, where.name, **kwargs)


def _column(name: str | None, columns, flag: str) -> str | None:
    """A column a flag names, short names resolved as query's --columns are (`heads`)."""
    if name is None or name == "auto":
        return name
    return resolve_column(name, list(columns), flag, "", AnalysisInputError)


def _axes(args: argparse.Namespace, results) -> tuple[str | None, str | None, str | None]:
    """--x, --y and --facet with short names resolved against the sweep's trials columns."""
    columns = results.trials.columns
    return (_column(args.x, columns, "--x"), _column(args.y, columns, "--y"),
            _column(args.facet, columns, "--facet"))


def _records(frame) -> list[dict]:
    """A table as JSON-ready records (the same values `format_frame` writes as JSON)."""
    return json.loads(format_frame(frame, "json"))


def _print_json(data) -> None:
    print(json.dumps(data))


def _add_json(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON")


# ---------------------------------------------------------------- query

@_one_line_errors
def run_query(args: argparse.Namespace) -> int:
    where = _located(args)
    root, sweep = where.results, where.name
    if args.sql is not None:
        if args.where is not None or args.columns is not None or args.all:
            raise AnalysisInputError("give --sql, or --where/--columns/--all, not both")
        frame = sql(root, args.sql, sweep)
        if args.limit is not None:
            frame = frame.head(args.limit)
    else:
        if args.all and args.columns is not None:
            raise AnalysisInputError("give --columns or --all, not both")
        if args.only and args.columns is None:
            raise AnalysisInputError("--only: give --columns too (--only keeps exactly them)")
        columns = _columns(args.columns) or (None if args.all else DEFAULT)
        frame = query_frame(root, sweep, where=args.where, columns=columns, table=args.table,
                            limit=args.limit, only=args.only)
    sys.stdout.write(format_frame(frame, _query_format(args)))
    return 0


def _query_format(args: argparse.Namespace) -> str:
    """--format, or json for --json (the flag every command that prints a result takes)."""
    if args.json and args.format not in (None, "json"):
        raise AnalysisInputError(f"--json and --format {args.format}: give one")
    return "json" if args.json else (args.format or "table")


def _add_query(subparsers) -> None:
    p = subparsers.add_parser(
        "query", help="print a sweep's trials or trajectories, filtered, or run SQL",
        description="Rows of a sweep's trials (or trajectories), filtered with --where and "
                    "projected with --columns; or any SQL over the views trials and "
                    "trajectories (DuckDB; quote dotted names: \"model.heads\").")
    _add_sweep(p)
    p.add_argument("--where", help="e.g. 'model.heads == 1 and task.hardness > 0.5'")
    p.add_argument("--columns", help="these after the swept columns (and the trial id), "
                                     "comma-separated, e.g. seed,learned,steps_to_learn; "
                                     "default: the swept columns, seed, status, outcome and "
                                     "final metrics")
    p.add_argument("--only", action="store_true",
                   help="with --columns: exactly those and the trial id, no swept columns")
    p.add_argument("--all", action="store_true", help="every column")
    p.add_argument("--table", choices=("trials", "trajectories"), default="trials",
                   help="one row per trial (default) or per logged step")
    p.add_argument("--sql", help='e.g. "SELECT * FROM trials JOIN trajectories USING (trial_id)"')
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="table (default), or csv / json for scripts")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument("--limit", type=int_argument(0), help="print at most this many rows")
    p.set_defaults(func=run_query, analysis_command="query")


# ---------------------------------------------------------------- best

@_one_line_errors
def run_best(args: argparse.Namespace) -> int:
    from .best import best_trials

    where = _located(args)
    root, sweep = where.results, where.name
    frame = best_trials(root, sweep, metric=args.metric, mode=args.mode, n=args.n,
                        where=args.where, by=args.by)
    sys.stdout.write(format_frame(frame, "json" if args.json else "table"))
    return 0


def _add_best(subparsers) -> None:
    from .best import BY, MODES

    p = subparsers.add_parser(
        "best", help="print a sweep's best configurations or trials by one metric",
        description="The configurations (seeds pooled: the mean over their finished seeds, "
                    "with a 95% interval) or the trials that finished, ranked by a numeric "
                    "trials column (a final or best metric, or a number outcome; by config "
                    "also a yes/no outcome's share), with their swept columns (and a trial's "
                    "seed and id).")
    _add_sweep(p)
    p.add_argument("--metric", required=True,
                   help="e.g. final_accuracy, best_loss, attention_steps (or a short name: "
                        "accuracy is final_accuracy)")
    p.add_argument("--by", choices=BY,
                   help="config: configurations by their mean over seeds (the default when "
                        "a configuration has several seeds); trial: single trials")
    p.add_argument("--mode", choices=MODES, default=None,
                   help="max: the highest first; min: the lowest first (default: min for a "
                        "loss or a step outcome, else max)")
    p.add_argument("-n", type=int_argument(1, 1_000_000), default=5,
                   help="how many configurations or trials (default 5)")
    p.add_argument("--where", help="only trials matching, e.g. 'model.heads == 1'")
    p.add_argument("--json", action="store_true", help="a JSON list of records")
    p.set_defaults(func=run_best, analysis_command="best")


# ---------------------------------------------------------------- phase

class _Outcomes:
    """`--outcome`'s choices: the success outcomes of the registered families, read when
    argparse checks or shows them (not while every command's parser is built)."""

    def __contains__(self, outcome: object) -> bool:
        return outcome in self._names()

    def __iter__(self):
        return iter(self._names())

    @staticmethod
    def _names() -> tuple[str, ...]:
        from .outcomes import success_choices

        return success_choices()


def _bins_argument(text: str) -> int | dict[str, int] | str | None:
    """`--bins`: N for both axes, x=N,y=M per axis, none (no bins; a grid's values) or auto."""
    from .phase import MAX_BINS

    allowed = (f"allowed: an integer from 2 to {MAX_BINS} (both axes), x=N,y=M per axis, "
               "none or auto")
    if text.strip().lower() == "auto":  # the default: binned for a random or Optuna sweep
        return "auto"
    if text.strip().lower() in ("none", "0"):
        return None
    parse = int_argument(0, MAX_BINS)
    if "=" not in text:
        return _bin_count(parse, text, allowed) or None
    counts = {}
    for part in text.split(","):
        axis, _, value = part.partition("=")
        if axis.strip() not in ("x", "y") or axis.strip() in counts:
            raise argparse.ArgumentTypeError(f"got {text!r}; {allowed}")
        counts[axis.strip()] = _bin_count(parse, value, allowed)
    return counts


def _bin_count(parse: Callable[[str], int], text: str, allowed: str) -> int:
    try:
        bins = parse(text.strip())
    except argparse.ArgumentTypeError:
        bins = 1  # refused below, with the grammar
    if bins == 1:
        raise argparse.ArgumentTypeError(f"got {text!r}; {allowed}")
    return bins


def _size_argument(text: str) -> tuple[float, float]:
    """`--size W,H`: the figure's width and height in inches."""
    from .plots import check_size

    try:
        return check_size(text)
    except AnalysisInputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("size: ")) from None


def _add_phase_options(p: argparse.ArgumentParser, axes_required: bool) -> None:
    _add_sweep(p)
    p.add_argument("--x", required=axes_required, help="x axis column, e.g. task.cooccurrence")
    p.add_argument("--y", required=axes_required, help="y axis column, e.g. task.hardness")
    p.add_argument("--facet", type=_facet, default="auto",
                   help="one panel per value, e.g. model.heads; 'none' for one panel "
                        "(default: the swept model column)")
    p.add_argument("--outcome", choices=_Outcomes(),
                   help="what counts as success: attention_learned (the best head's attention "
                        "accuracy reaches --attention-learned-threshold) or learned (token "
                        "accuracy reaches --threshold), or a success outcome a plugin family "
                        "declares; default: the sweep's family's (copy: attention_learned, "
                        "topic: learned)")
    _add_threshold_options(p)
    p.add_argument("--min-seeds", type=int_argument(1, 100_000), default=3,
                   help="cells with fewer counted seeds are marked insufficient (default 3)")


@_one_line_errors
def run_phase(args: argparse.Namespace) -> int:
    from . import plots  # matplotlib only when drawing
    from .phase import default_axes, phase_from_results

    _check_suffix(args.output, plots.FORMATS, "-o")  # before any work
    if args.cells:
        _check_suffix(args.cells, (".csv", ".json"), "--cells")
    results = _load(args)
    x, y, facet = _axes(args, results)
    if facet == "auto":
        auto = default_axes(results.trials, results.manifests)[2]
        facet = auto if auto not in (x, y) else None
    phase = phase_from_results(results, x, y, facet, thresholds=_thresholds(args),
                               min_seeds=args.min_seeds, outcome=args.outcome,
                               bins=args.bins, bins_method=args.bins_method)
    if getattr(args, "view", "phase") == "lottery":
        return _run_lottery(args, results, phase)
    if getattr(args, "view", "phase") == "regime":
        return _run_regime(args, results, phase)
    try:
        fig = plots.phase_figure(phase, title=args.title, size=args.size)
    except AnalysisInputError as exc:  # a --size too small for the panels: name the flag
        raise AnalysisInputError(f"--{exc}" if str(exc).startswith("size:") else str(exc)
                                 ) from None
    path = plots.save(fig, args.output)
    if args.cells:
        _write_cells(phase, Path(args.cells))
    counts = phase.cells["state"].value_counts()
    if args.json:
        return _phase_json(results, phase, path, "cells", phase.cells)
    summary = ", ".join(f"{r} {int(counts.get(r, 0))}" for r in
                        ("learned", "failed", "unreliable", "insufficient", "missing"))
    print(f"wrote {path}: {phase.outcome}, {count(len(phase.cells), 'cell')} ({summary}); "
          f"{int(phase.cells['recovered'].sum())} recovered; "
          f"{count(len(phase.boundary), 'boundary segment')}")
    if not phase.recovery.empty:
        verdicts = phase.recovery["verdict"].astype(str)
        unsure = int(verdicts.str.startswith("cannot tell").sum())
        print(f"against {phase.facet} = {phase.base}, cell by cell (Fisher's exact): "
              f"{int((verdicts == 'more learn').sum())} more learn, "
              f"{int((verdicts == 'fewer learn').sum())} fewer, "
              f"{int((verdicts == 'no difference').sum())} no difference with the power to "
              f"tell, {unsure} cannot tell at 0.2")
    for binned in phase.bins.values():
        print(binned.describe())
    return 0


def _phase_json(results, phase, path, name: str, table) -> int:
    """`phase --json`: the sweep, the axes, the figure written and the view's table (the
    cells; --view lottery: the lottery table; --view regime: the regime counts)."""
    _print_json({"sweep": results.sweeps[0].name, "output": str(path),
                 "outcome": phase.outcome, "x": phase.x, "y": phase.y, "facet": phase.facet,
                 name: _records(table)})
    return 0


def _run_lottery(args: argparse.Namespace, results, phase) -> int:
    """`--view lottery`: the map of recovery beyond independent heads, the lottery table
    (--cells), and how many heads aligned per cell where the family counts them."""
    from . import plots
    from .outcomes import with_outcomes
    from .phase import heads_aligned, lottery_summary, outcome_trajectories

    path = plots.save(plots.lottery_figure(phase), args.output)
    if args.cells:
        _write_table(phase.lottery, Path(args.cells))
    lot = phase.lottery
    if args.json:
        return _phase_json(results, phase, path, "lottery", lot)
    print(f"wrote {path}: {phase.outcome}, lottery from {phase.facet} = "
          f"{lot['heads_base'].iloc[0]}: {lottery_summary(lot)}")
    if "attention_heads" in results.trials.columns:
        trials = with_outcomes(results.trials, outcome_trajectories(results), _thresholds(args))
        print("heads aligned per trial (seeds with 0, 1, 2, ... heads aligned):")
        sys.stdout.write(format_frame(heads_aligned(trials, [phase.facet, phase.x, phase.y])))
    return 0


def _run_regime(args: argparse.Namespace, results, phase) -> int:
    """`--view regime`: each cell coloured by the regime most of its seeds ended in, the
    counts written in it; --cells writes the counts per cell."""
    from . import plots

    path = plots.save(plots.trial_regime_figure(phase), args.output)
    table = phase.trial_regimes
    if args.cells:
        _write_table(table, Path(args.cells))
    if args.json:
        return _phase_json(results, phase, path, "regimes", table)
    totals = ", ".join(f"{name} {int(table[name].sum())}" for name in phase.regime_codes)
    print(f"wrote {path}: {phase.regime_column} of {count(int(table['n'].sum()), 'seed')} in "
          f"{count(int((table['n'] > 0).sum()), 'cell')} ({totals})")
    return 0


def _check_suffix(path: str, allowed: tuple[str, ...], flag: str) -> None:
    if Path(path).suffix.lower() not in allowed:
        raise AnalysisInputError(f"{flag} {path!r}: use a file ending in {', '.join(allowed)}")


def _write_cells(phase, path: Path) -> None:
    _write_table(phase.cells, path)


def _write_table(frame, path: Path) -> None:
    text = (frame.to_csv(index=False) if path.suffix == ".csv"
            else frame.to_json(orient="records"))
    write_whole_file(path, text.encode())


def _add_phase(subparsers) -> None:
    p = subparsers.add_parser(
        "phase", help="draw a phase diagram (PNG or SVG by the file's extension)",
        description="Success probability per cell of two axes, one panel per facet value, "
                    "with Wilson intervals, states, the p = 0.5 boundary and recovery maps. "
                    "Outcomes are recomputed from the trajectories at the given thresholds.")
    _add_phase_options(p, axes_required=True)
    p.add_argument("-o", "--output", default="phase.png", help="phase.png or phase.svg")
    p.add_argument("--cells", help="also write the cells table here (.csv or .json); with "
                                   "--view lottery, the lottery table; with --view regime, "
                                   "the regime counts")
    p.add_argument("--bins", type=_bins_argument, default="auto", metavar="N|x=N,y=M|none",
                   help="bin continuous x/y values into N cells per axis (x=5,y=4 per axis; "
                        "none: one cell per value); default: 5 for a random or Optuna sweep, "
                        "none for a grid")
    p.add_argument("--bins-method", choices=("quantile", "width"), default="quantile",
                   help="quantile (default): about as many trials per bin; width: equal "
                        "widths (in log space on a log-uniform axis)")
    p.add_argument("--title", help="the figure's title (default: outcome, axes, bins and how "
                                   "cells are judged; --view phase)")
    p.add_argument("--size", type=_size_argument, metavar="W,H",
                   help="the figure's width and height in inches, e.g. 10,6 (default: what "
                        "the panels need; --view phase)")
    p.add_argument("--view", choices=("phase", "lottery", "regime"), default="phase",
                   help="phase (default): the diagram and recovery maps; lottery: recovery "
                        "beyond independent heads (facet model.heads), and heads aligned; "
                        "regime: each cell coloured by the regime most of its seeds found "
                        "(copy: aligned, offset, diffuse, ...), with the counts")
    _add_json(p, "the sweep, the axes and the cells (the view's table)")
    p.set_defaults(func=run_phase, analysis_command="phase")


# ---------------------------------------------------------------- report

@_one_line_errors
def run_report(args: argparse.Namespace) -> int:
    from .report import write_report

    _check_suffix(args.output, (".html", ".htm"), "-o")
    results = _load(args)
    x, y, facet = _axes(args, results)
    report = write_report(results, args.output, x=x, y=y, facet=facet,
                          thresholds=_thresholds(args), min_seeds=args.min_seeds,
                          outcome=args.outcome)
    if args.json:
        _print_json({"sweep": results.sweeps[0].name, "output": args.output,
                     "trials": len(results.trials), "cells": len(report.phase.cells),
                     "figures": len(report.figures)})
        return 0
    print(f"wrote {args.output}: {count(len(results.trials), 'trial')}, "
          f"{count(len(report.phase.cells), 'cell')}, {count(len(report.figures), 'figure')}")
    return 0


def _add_report(subparsers) -> None:
    p = subparsers.add_parser(
        "report", help="write one self-contained HTML page about a sweep",
        description="Manifest, counts, phase diagrams, trajectory plots and the cells table "
                    "in one HTML file with its figures embedded (readable offline).")
    _add_phase_options(p, axes_required=False)
    p.add_argument("-o", "--output", default="report.html",
                   help="the HTML file to write (default report.html)")
    _add_json(p, "the sweep and what the page holds")
    p.set_defaults(func=run_report, analysis_command="report")


# ---------------------------------------------------------------- seeds

MAX_SEED_CELLS = 16


@_one_line_errors
def run_seeds(args: argparse.Namespace) -> int:
    from . import plots
    from .phase import default_outcome
    from .seeds import cell_keys, seed_metrics, split_cells

    _check_suffix(args.output, plots.FORMATS, "-o")
    results = _load(args, where=args.where)
    if results.trials.empty:
        raise AnalysisInputError(f"--where {args.where!r} selects no trials"
                                 if args.where else "the sweep has no trials")
    outcome = args.outcome or default_outcome(results)
    metrics = ([_column(m, results.trajectory_columns, "--metrics")
                for m in _columns(args.metrics)] if args.metrics else seed_metrics(results))
    by = args.by and ",".join(_column(k.strip(), results.trials.columns, "--by")
                              for k in args.by.split(",") if k.strip())
    keys = cell_keys(_load(args), by)
    cells = split_cells(results.trials, keys)
    if len(cells) > MAX_SEED_CELLS:
        raise AnalysisInputError(
            f"--where selects {len(cells)} cells (by {', '.join(keys)}); allowed: at most "
            f"{MAX_SEED_CELLS}: narrow it, e.g. --where '{keys[0]} == ...'")
    from .seeds import cell_trajectories

    trials, rows = cell_trajectories(results, metrics, _thresholds(args))
    fig = plots.seeds_figure(trials, rows, cells, metrics, outcome, _thresholds(args))
    path = plots.save(fig, args.output)
    if args.json:
        _print_json({"sweep": results.sweeps[0].name, "output": str(path), "cells": cells,
                     "metrics": metrics, "trials": sorted(trials["trial_id"])})
        return 0
    print(f"wrote {path}: {count(len(cells), 'cell')}, {count(len(trials), 'trial')}, "
          f"{', '.join(metrics)}")
    return 0


def _add_seeds(subparsers) -> None:
    p = subparsers.add_parser(
        "seeds", help="draw every seed's curves of one or more cells, coloured by outcome",
        description="One row per cell (the trials --where selects, split by the sweep's "
                    "varying columns), one panel per metric, one line per seed coloured by its "
                    "outcome, with the threshold drawn.")
    _add_sweep(p)
    p.add_argument("--where", help="which trials, e.g. 'task.cooccurrence == 0 and "
                                   "model.heads == 1'")
    p.add_argument("--metrics", help="comma-separated trajectory columns (default: the "
                                     "family's, e.g. accuracy,attn_acc)")
    p.add_argument("--by", help="comma-separated columns that make a cell (default: the "
                                "sweep's varying config columns)")
    p.add_argument("--outcome", choices=_Outcomes(),
                   help="what colours a seed (default: the sweep's family's)")
    _add_threshold_options(p)
    p.add_argument("-o", "--output", default="seeds.png", help="seeds.png, .svg or .pdf")
    _add_json(p, "the sweep, its cells, the metrics and the trials drawn")
    p.set_defaults(func=run_seeds, analysis_command="seeds")


# ---------------------------------------------------------------- heads

@_one_line_errors
def run_heads(args: argparse.Namespace) -> int:
    from .heads import head_classes

    if args.cells:
        _check_suffix(args.cells, (".csv", ".json"), "--cells")
    if args.classes is not None or args.alone is not None or args.pooled:
        if args.stage2 is not None or args.stage2_options_given:
            raise AnalysisInputError("--classes/--alone read SWEEP as stage 2; --stage2 and "
                                     "its options write stage 2 from a stage 1: give one")
        if args.classes is None or args.alone is None:
            raise AnalysisInputError("stage 2's paired table needs both --classes STAGE1 and "
                                     "--alone ALONE (its heads alone on stage 2's data seeds)")
        return _heads_table(args)
    if args.stage2 is None and args.stage2_options_given:
        raise AnalysisInputError("--heads, --sets and --data-seeds shape stage 2: give them "
                                 "with --stage2 FOLDER")
    results = _load(args)
    classes = head_classes(_recomputed(results, args))
    stage2 = _stage2(args, results.sweeps[0].manifest, classes) if args.stage2 else None
    if not args.json:
        sys.stdout.write(_describe_classes(results.sweeps[0].name, classes))
    if args.cells:
        _write_table(classes.heads, Path(args.cells))
    written = _write_stage2(args, stage2) if stage2 is not None else None
    if args.json:
        _print_json({"sweep": results.sweeps[0].name,
                     "classify_seeds": list(classes.classify_seeds),
                     "heads": _records(classes.heads), "rates": _records(classes.rates),
                     "stage2": written})
    return 0


def _describe_classes(name: str, classes) -> str:
    lines = [f"{name}: {classes.heads['head_seed'].nunique()} head seeds on base networks "
             f"{', '.join(map(str, classes.bases))}, classified on data seeds "
             f"{', '.join(map(str, classes.classify_seeds))}"]
    for base in classes.bases:
        counts = classes.on(base)["class"].value_counts()
        lines += [f"base {base}: good (learned in every one): "
                  + _seed_list(classes.seeds_of(base, "good")),
                  f"base {base}: bad (learned in none): "
                  + _seed_list(classes.seeds_of(base, "bad")),
                  f"base {base}: mixed: {int(counts.get('mixed', 0))} heads"]
    lines.append("each class on the classifying seeds (in-sample: the lottery's rates come "
                 "from the alone sweep on stage 2's seeds):")
    return "\n".join(lines) + "\n" + format_frame(classes.rates)


def _recomputed(results, args: argparse.Namespace):
    """The trials with their outcomes at the command's thresholds."""
    from .outcomes import with_outcomes
    from .phase import outcome_trajectories

    if results.trials.empty:
        raise AnalysisInputError(f"{args.sweep_dir}: no trials stored there; allowed: a sweep "
                                 "folder that sweeper run has stored trials in")
    return with_outcomes(results.trials, outcome_trajectories(results), _thresholds(args))


def _seed_list(seeds: list[int]) -> str:
    return f"{len(seeds)} heads: {', '.join(map(str, seeds))}" if seeds else "none"


def _stage2(args: argparse.Namespace, manifest: dict, classes) -> dict[str, dict]:
    """Stage 2's sweep files (one per base, and the alone sweep), checked before anything is
    printed or written."""
    import yaml

    from .heads import stage2_sweeps

    if Path(args.stage2).suffix in (".yaml", ".yml"):
        raise AnalysisInputError(f"--stage2: got {args.stage2}; allowed: a folder (stage 2 is "
                                 "one sweep file per base network and the alone sweep)")
    stage1 = yaml.safe_load(manifest.get("sweep_file") or "") or {}
    if not isinstance(stage1, dict) or "name" not in stage1:
        raise AnalysisInputError("the stage-1 sweep's manifest holds no sweep file to build "
                                 "stage 2 from; allowed: a sweep run by sweeper run")
    return stage2_sweeps(stage1, classes, heads=args.heads, sets=args.sets,
                         data_seeds=args.data_seeds, prefix=args.name)


def _stage2_header(args: argparse.Namespace, name: str, sweep: dict) -> str:
    from .heads import CONDITIONS

    alone = sweep["fixed"]["model"]["heads"] == 1
    what = ("every stage-1 head alone on every base and on stage 2's data seeds: each "
            "multi-head trial's paired runs" if alone else
            f"base network {sweep['fixed']['model']['base_seed']}: model.head_seeds lists "
            f"{args.sets} sets per condition, in this order: {', '.join(CONDITIONS)} (bad: "
            f"{args.heads} bad heads; one_good: {args.heads - 1} bad + 1 good, its position "
            "cycling; random: any heads of stage 1, neither of the other two)")
    import textwrap

    text = (f"The paired head experiment, written by `sweeper heads {args.sweep_dir} --stage2` "
            f"from stage 1's classification. {name}: {what}.")
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, 94))


def _write_stage2(args: argparse.Namespace, sweeps: dict[str, dict]) -> list[dict]:
    import yaml

    folder = Path(args.stage2)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, sweep in sweeps.items():
        path = folder / f"{name}.yaml"
        existed = path.exists()
        text = _stage2_header(args, name, sweep) + yaml.safe_dump(
            sweep, sort_keys=False, default_flow_style=None, width=96)
        write_whole_file(path, text.encode())
        axes = sweep["axes"]["model"]
        sets = len(axes["head_seeds"]["grid"]) * len(axes.get("base_seed", {}).get("grid", [1]))
        trials = sets * len(sweep["seeds"])
        if not args.json:
            heads = count(sweep["fixed"]["model"]["heads"], "head")
            print(f"wrote {path}{' (replaced)' if existed else ''}: {name}, "
                  f"{count(trials, 'trial')} of {heads}")
        written.append({"file": str(path), "sweep": name, "trials": trials,
                        "heads": sweep["fixed"]["model"]["heads"]})
    if not args.json:
        print(_stage2_size(args, len(written) - 1))
    return written


def _stage2_size(args: argparse.Namespace, bases: int) -> str:
    """What stage 2's size can detect between conditions, and the --sets a target needs."""
    import math

    from sweeper.results.stats import EFFECT, compare_rates, detectable_effect

    per_condition = args.sets * len(args.data_seeds) * bases
    effect = args.effect or EFFECT
    needed = compare_rates(0, 0, 0, 0, effect=effect).needed
    found = detectable_effect(per_condition)
    can = f"{found:g}" if found is not None else "no difference"
    sets = (f"--sets {math.ceil(needed / (len(args.data_seeds) * bases))}" if needed
            else "more than the search's limit")
    return (f"power: {per_condition} trials a condition detect {can} between two conditions "
            f"(Fisher's exact, 80%, from 0.5); a difference of {effect:g} needs {needed} a "
            f"condition: {sets}")


def _heads_table(args: argparse.Namespace) -> int:
    import pandas as pd

    from .heads import (
        class_rates,
        compact_table,
        comparisons,
        good_head_steps,
        head_classes,
        paired_table,
        paired_trials,
    )
    from .phase import outcome_trajectories

    stage1 = _load_located(args, args.classes, "--classes")
    classes = head_classes(_recomputed(stage1, args))
    alones = [_load_located(args, a, "--alone") for a in args.alone]
    alone_trials = pd.concat([_recomputed(a, args) for a in alones], ignore_index=True)
    alone_names = ", ".join(a.sweeps[0].name for a in alones)
    stages = [_load(args)] + [_load_located(args, s, "--with") for s in args.pooled]
    _check_stage2(stages, ["SWEEP"] + ["--with"] * len(args.pooled))
    trials = pd.concat([_recomputed(r, args) for r in stages], ignore_index=True)
    trajectories = pd.concat([outcome_trajectories(r) for r in stages], ignore_index=True)
    per_trial = paired_trials(trials, trajectories, alone_trials, classes, _thresholds(args))
    rates = class_rates(alone_trials, classes, sorted(per_trial["seed"].unique()))
    table = paired_table(per_trial, rates, effect=args.effect, by_base=args.by_base)
    tests = comparisons(per_trial, effect=args.effect)
    good = good_head_steps(per_trial)
    names = [r.sweeps[0].name for r in stages]
    if args.cells:
        _write_table(table, Path(args.cells))
        if not args.json:
            print(f"wrote {args.cells}")
    figure = None
    if args.output:
        from . import plots

        figure = str(plots.save(plots.heads_figure(table), args.output))
    if args.json:
        _print_json({"sweeps": names, "classified_by": stage1.sweeps[0].name, "figure": figure,
                     "alone": alone_names, "class_rates": _records(rates),
                     "table": _records(table), "comparisons": _records(tests),
                     "good_head": _records(good)})
        return 0
    print(f"{', '.join(names)}: {count(len(per_trial), 'trial')}, heads classified by "
          f"{stage1.sweeps[0].name}, paired with {alone_names} (each head alone on the same "
          "base and data seed, at the same budget)")
    print("each class alone on stage 2's data seeds, per base:")
    sys.stdout.write(format_frame(rates, args.format))
    print("the model against its heads alone, trial by trial (exact McNemar, and over head "
          "sets; verdicts with their power against a difference of "
          f"{args.effect or 0.2:g}; the whole table: --cells, --format csv):")
    sys.stdout.write(format_frame(table if args.format != "table" else compact_table(table),
                                  args.format))
    print("comparisons:")
    sys.stdout.write(format_frame(tests, args.format))
    if not good.empty:
        print("the good head, alone and in company:")
        sys.stdout.write(format_frame(good, args.format))
    if figure:
        print(f"wrote {figure}")
    return 0


def _check_stage2(stages: list, flags: list[str]) -> None:
    """SWEEP and every --with: distinct sweeps of multi-head trials (a one-head sweep there,
    stage 1 or the alone sweep, would be pooled as if it were eight-head models)."""
    seen: dict[str, str] = {}
    for results, flag in zip(stages, flags):
        name = results.sweeps[0].name
        if name in seen:
            raise AnalysisInputError(f"{flag}: got {name} twice; allowed: each stage-2 sweep "
                                     "once (its trials would count twice)")
        seen[name] = flag
        heads = results.trials["model.heads"] if "model.heads" in results.trials else None
        if heads is None or (heads.dropna().astype(int) < 2).any():
            raise AnalysisInputError(f"{flag}: {name} holds one-head trials; allowed: a "
                                     "stage-2 sweep of multi-head models (stage 1 goes to "
                                     "--classes, the alone sweep to --alone)")


def _load_located(args: argparse.Namespace, target: str, argument: str):
    located = _located(args, target, argument)
    return load(located.results, located.name)


def _seed_values(text: str) -> list[int]:
    parse = int_argument(0, MAX_SEED)
    seeds = [parse(s.strip()) for s in text.split(",") if s.strip()]
    if not seeds:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: comma-separated integers "
                                         ">= 0, e.g. 1000,1001,1002,1003")
    return seeds


class _Stage2Option(argparse.Action):
    """Records that a stage-2 option was given, so it is refused without --stage2."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.stage2_options_given = True


def _add_heads(subparsers) -> None:
    p = subparsers.add_parser(
        "heads", help="the paired head experiment: classify heads, write stage 2, test it "
                      "against the lottery with its power",
        description="Stage 1 (one-head models over many model.head_seeds on one or more "
                    "model.base_seed): which heads are good on their base (attention learned "
                    "in every data seed) or bad (in none); --stage2 FOLDER writes the "
                    "multi-head sweeps (one per base) and the alone sweep (every head alone on "
                    "stage 2's data seeds). With --classes STAGE1 --alone ALONE, stage 2's "
                    "paired table: each model against its own heads alone on the same base and "
                    "data seed (exact McNemar), heads in company against alone, conditions "
                    "against each other, every verdict with its power.")
    _add_sweep(p)
    p.add_argument("--with", dest="pooled", action="append", default=[], metavar="STAGE2",
                   help="another stage-2 sweep pooled with SWEEP (another base network); "
                        "repeatable")
    p.add_argument("--classes", metavar="STAGE1",
                   help="read SWEEP as stage 2, its heads classified by this stage 1 (named as "
                        "SWEEP is)")
    p.add_argument("--alone", metavar="ALONE", action="append",
                   help="the alone sweep: stage 2's heads alone on its bases and data seeds "
                        "(repeatable: alone sweeps of other budgets or seeds)")
    p.add_argument("--by-base", action="store_true",
                   help="with --classes: one row per base network as well as arm and condition")
    p.add_argument("--effect", type=_effect_value, default=None,
                   help="the difference in success rate every test's power is computed "
                        "against (default 0.2)")
    p.add_argument("--stage2", metavar="FOLDER", help="write stage 2's sweep files here")
    p.add_argument("--heads", type=int_argument(2, 256), default=8, action=_Stage2Option,
                   help="heads of stage 2's models (default 8)")
    p.add_argument("--sets", type=int_argument(1, 10_000), default=6, action=_Stage2Option,
                   help="head sets per condition and base (default 6)")
    p.add_argument("--data-seeds", type=_seed_values, default=[3000, 3001, 3002, 3003],
                   action=_Stage2Option,
                   help="stage 2's data seeds (default 3000,3001,3002,3003: not stage 1's)")
    p.add_argument("--name", help="stage 2's sweep names' prefix (default: stage 1's name "
                                  "without _stage1)")
    p.add_argument("--cells", help="also write the table (heads, or stage 2's) as .csv/.json")
    p.add_argument("-o", "--output", help="with --classes: draw stage 2's paired table "
                                          "(.png, .svg or .pdf)")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="stage 2's table as table (default), csv or json")
    _add_json(p, "the classes (or, with --classes, the table) and the sweep")
    _add_threshold_options(p)
    p.set_defaults(func=run_heads, analysis_command="heads", stage2_options_given=False)


def _effect_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: a difference in success "
                                         "rate strictly between 0 and 1, e.g. 0.2")
    return value


# ---------------------------------------------------------------- dashboard

@_one_line_errors
def run_dashboard(args: argparse.Namespace) -> int:
    from .dashboard.server import serve

    results, sweep = _dashboard_target(args)
    return serve(results, sweep, host=args.host, port=args.port,
                 allow_remote=args.allow_remote, token=args.token, open_browser=False)


def _dashboard_target(args: argparse.Namespace) -> tuple[str, str | None]:
    """(results root, the sweep to open first or None for the root's list): SWEEP as every
    command names it; a results root itself (a folder that is no sweep: its sweeps listed);
    or the older RESULTS SWEEP pair (the sweep may not exist yet: it shows as it lands)."""
    if args.sweep is not None:
        if args.results is not None:
            raise AnalysisInputError("give RESULTS SWEEP, or SWEEP --results RESULTS: not both")
        return args.sweep_dir, args.sweep
    if args.results is None and _is_results_root(args.sweep_dir):
        return args.sweep_dir, None
    name = args.sweep_dir
    if (args.results is not None and "/" not in name and "://" not in name
            and not is_sweep_file(name)):  # SWEEP --results RESULTS: it may not exist yet
        from sweeper.results.layout import check_sweep_name

        check_sweep_name(name, "SWEEP")
        try:
            _located(args)
        except (AnalysisInputError, ResultsInputError) as missing:  # said, then waited for
            print(f"note: {str(missing).split('; allowed')[0]}; the page shows it when it "
                  "starts", file=sys.stderr, flush=True)
        return args.results, name
    where = _located(args)
    return where.results, where.name


def _is_results_root(target: str) -> bool:
    """A folder (local, or a URI's) that holds no sweep's own files: a results root."""
    import pyarrow.fs as pafs

    from .load import resolve_root

    if is_sweep_file(target) or ("://" not in target and not Path(target).is_dir()):
        return False
    fs, root = resolve_root(target)
    kinds = [i.type for i in fs.get_file_info([root, f"{root}/trials",
                                               f"{root}/manifest.json"])]
    return kinds[0] == pafs.FileType.Directory and kinds[1:] == [pafs.FileType.NotFound] * 2


def _add_dashboard(subparsers) -> None:
    p = subparsers.add_parser(
        "dashboard", help="a live local web dashboard of a running or finished sweep",
        description="Serves a dashboard on 127.0.0.1: phase diagrams for any axes updating as "
                    "packs land (from the sweep's cell summary), each cell's seeds, failed "
                    "trials, the objective of random and Optuna searches, and progress. Its "
                    "assets are served locally (works offline).")
    p.add_argument("sweep_dir", metavar="SWEEP",
                   help=f"the sweep to open: {SWEEP_HELP}; or a results root, to list its "
                        "sweeps")
    p.add_argument("sweep", metavar="NAME", nargs="?",
                   help="the older form RESULTS NAME: the sweep NAME under the root given "
                        "first (it may not exist yet)")
    p.add_argument("--results", help="the results root a sweep name is under (default: the "
                                     f"sweep file's, else {DEFAULT_RESULTS})")
    p.add_argument("--port", type=int_argument(0, 65535), default=8787,
                   help="port to listen on (default 8787; 0: any free port)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1); any other needs --allow-remote")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host; every request then needs the token")
    p.add_argument("--token", help="the token remote clients must send (default: a random one, "
                                   "printed in the URL; or $SWEEPER_DASHBOARD_TOKEN)")
    p.set_defaults(func=run_dashboard, analysis_command="dashboard")


def _add_papers(subparsers) -> None:
    from . import papers

    p = subparsers.add_parser(
        "papers", help="the numbers the two papers report, from the shipped sweeps",
        description="Prints, as Markdown, the tables docs/results.md quotes (Snell et al. "
                    "2021, Lu et al. 2021) from every shipped sweep stored under RESULTS; "
                    "with --figures, draws their figures into that folder.")
    papers.add_arguments(p, DEFAULT_RESULTS)
    p.set_defaults(func=papers.run, analysis_command="papers")


def register(subparsers) -> None:
    """Add `query`, `best`, `phase`, `report`, `seeds`, `heads`, `dashboard` and `papers` to an
    argparse subparsers object."""
    _add_query(subparsers)
    _add_best(subparsers)
    _add_phase(subparsers)
    _add_report(subparsers)
    _add_seeds(subparsers)
    _add_heads(subparsers)
    _add_dashboard(subparsers)
    _add_papers(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m analysis",
                                     description="Query sweeps and draw their phase diagrams.")
    register(parser.add_subparsers(dest="subcommand", required=True))
    return parser


def main(argv: list[str] | None = None) -> int:
    """`python -m analysis`: the three subcommands on their own."""
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return status
    except BrokenPipeError:
        return closed_pipe_exit()
