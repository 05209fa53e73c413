"""The sweep commands: plan, run, status, compact, submit."""

from __future__ import annotations

import argparse
import json
import sys

from sweeper.errors import SweeperInputError
from sweeper.numbers import shown
from sweeper.report import table
from sweeper.results.location import DEFAULT_RESULTS, SWEEP_FORMS
from sweeper.results.words import count


def _results_root(args: argparse.Namespace, sweep=None) -> str:
    return args.results or (sweep.results if sweep is not None else None) or DEFAULT_RESULTS


def _load(path: str):
    from sweeper.search_space import load_sweep

    return load_sweep(path)


def _load_with_sets(path: str, sets: list[str] | None):
    """The sweep file with `--set` overrides applied (`sweeper.overrides.apply_sets`)."""
    if not sets:
        return _load(path)
    from sweeper.overrides import sweep_from

    return sweep_from(path, sets=sets)


SET_HELP = ("override the file: model.width=48 (a fixed value), model.heads=1,4 (an axis), "
            "heads=4 (a parameter's own name, when one group has it), seeds=4, "
            "budget.steps=100, name=other (repeatable)")


STRICT_HELP = ("refuse a value the task trains as another (c = 0.25 at task.length=6 trains as "
               "1/3) instead of noting it")


def _refuse_as_run_would(plan, store, args: argparse.Namespace) -> None:
    """`plan` refuses what `run` would (one line, exit 2), in the order run checks it: a
    results root this user cannot write, a damaged manifest, a changed configuration without
    --extend (`sweeper.identity.check_same_study`), and what the executor cannot run (a GPU
    this machine lacks, a pack larger than embedded Ray, a scheduler on the local executor:
    `Executor.check`), without starting it."""
    from sweeper.executors.checks import check_executor
    from sweeper.identity import check_same_study
    from sweeper.results.store import check_writable

    check_writable(store)
    check_same_study(plan.sweep, plan.identity, store.read_manifest(plan.sweep.name),
                     args.extend)
    check_executor(args.executor, plan.sweep, store, address=args.address,
                   num_cpus=args.num_cpus, results_shared=args.results_shared)


def cmd_plan(args: argparse.Namespace) -> int:
    from sweeper.packing import form_packs
    from sweeper.plan import make_plan
    from sweeper.results import Store

    sweep = _load_with_sets(args.file, args.set)
    store = Store.open(_results_root(args, sweep))
    plan = make_plan(sweep, store.done_ids(sweep.name))  # failed trials: trained again
    from sweeper.plan import realised_notes

    realised = realised_notes(plan.specs, sweep, args.strict)
    budget = None
    if args.address is None:  # as `sweeper run` admits it here, before the estimate's probe
        from sweeper.admission import admit_here

        budget = admit_here(sweep, plan.specs, args.pack_size or sweep.pack_size)
    from sweeper.api import choose_executor

    args.executor, chosen = choose_executor(args.executor, sweep, plan, store, args.address,
                                            args.pack_size or sweep.pack_size, args.num_cpus)
    _refuse_as_run_would(plan, store, args)
    from sweeper.admission import calibration_warnings, power_notes, resolution_warnings

    for warning in [*realised, *([chosen] if chosen else []), *resolution_warnings(sweep),
                    *calibration_warnings(sweep, plan.specs), *power_notes(sweep)]:
        print(warning, file=sys.stderr)  # on stderr: --json stays parseable
    from sweeper.estimate import estimate_for, parallelism

    how = parallelism(args.executor, sweep, address=args.address, num_cpus=args.num_cpus,
                      workers=args.workers)
    cost, unestimated = None, None
    if not args.no_estimate:  # the same function `sweeper run` compares its time with
        probe = (args.probe or "cached") if args.address is None else False
        cost = estimate_for(plan, store, how, args.pack_size or sweep.pack_size, budget,
                            probe=probe,
                            say=lambda line: print(line, file=sys.stderr, flush=True))
        if cost is None and probe == "cached" and (plan.adaptive or plan.sharing.trainings):
            unestimated = ("estimate: none yet (nothing of this shape stored or probed in the "
                           "last hour); --probe times one pack of each shape (~10-40 s), and "
                           "`sweeper run` does before it trains")
    described = plan.strategy.describe(plan)  # an adaptive search says what it may train
    if described is not None:
        data, text = described
        data["estimate"] = None if cost is None else cost.to_json()
        print(json.dumps(data) if args.json else
              text + ("" if cost is None else "\n" + cost.line())
              + ("" if unestimated is None else "\n" + unestimated))
        return 0
    pending, sharing = plan.pending, plan.sharing
    packs = form_packs(sharing.trainings, args.pack_size or sweep.pack_size, how.slots,  # as run
                       None if budget is None else budget // how.slots)
    columns = ["trial_id"] + [a.column for a in sweep.axes] + ["seed"]
    rows = [[s.trial_id] + [s.flat()[c] for c in columns[1:]] for s in plan.specs[:args.rows]]
    if args.json:
        print(json.dumps({
            "sweep": sweep.name, "search": sweep.search.type, "adaptive": False,
            "trials": len(plan.specs), "stored": len(plan.specs) - len(pending),
            "pending": len(pending), "trainings": len(sharing.trainings),
            "shared": sharing.saved, "packs": len(packs), "seeds_per_cell": len(sweep.seeds),
            "estimate": None if cost is None else cost.to_json(),
            "rows": [dict(zip(columns, r)) for r in rows]}))
        return 0
    if not pending:
        print(f"{sweep.name}: nothing to run: all {count(len(plan.specs), 'trial')} "
              f"{'is' if len(plan.specs) == 1 else 'are'} stored")
        return 0
    print(f"{sweep.name}: {count(len(plan.specs), 'trial')} ({sweep.search.type} search, "
          f"{count(len(sweep.seeds), 'seed')} per cell); {len(plan.specs) - len(pending)} "
          f"stored, {len(pending)} to run in {count(len(packs), 'pack')}")
    if sharing.saved:
        print(f"{count(len(sharing.trainings), 'training')}: {count(sharing.saved, 'trial')} "
              f"{'shares' if sharing.saved == 1 else 'share'} an equivalent trial's training "
              "(parameters that change nothing there, e.g. hardness at c = 0) and "
              f"{'is' if sharing.saved == 1 else 'are'} stored with its results, not trained "
              "again")
    if cost is not None:
        print(cost.line())
    elif unestimated is not None:
        print(unestimated)
    print(table(rows, columns))
    if len(plan.specs) > args.rows:
        print(f"... {len(plan.specs) - args.rows} more")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from sweeper.api import run

    result = run(args.file, results=args.results, executor=args.executor, address=args.address,
                 num_cpus=args.num_cpus, pack_size=args.pack_size, retries=args.retries,
                 device=args.device, results_shared=args.results_shared, verbose=args.verbose,
                 wait=args.wait, extend=args.extend, sets=args.set,
                 estimate=not args.no_estimate, strict=args.strict, workers=args.workers)
    if result.interrupted:  # a late second signal must not turn a clean stop into a traceback
        import signal

        from sweeper.interrupts import EXIT_STATUS

        for signum in EXIT_STATUS:
            signal.signal(signum, signal.SIG_IGN)
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(result.summary())
        if result.cells is not None:
            print("\n" + result.cell_table())
        if result.best_trial_text():  # an Optuna search's best trial, last
            print("\n" + result.best_trial_text())
    if result.interrupted:
        pending = count(result.pending, "trial") if result.pending is not None else "some trials"
        print(f"interrupted: {pending} pending; run the same command to resume",
              file=sys.stderr)
    return result.exit_status


def _sweep_name_and_store(args: argparse.Namespace):
    """The sweep SWEEP names (`sweeper.results.location.locate_sweep`: a name under --results,
    RESULTS/SWEEP, or the sweep file), its location and its store."""
    from sweeper.results import Store
    from sweeper.results.location import locate_sweep

    location = locate_sweep(args.sweep, args.results)
    return location, Store.open(location.results)


def cmd_status(args: argparse.Namespace) -> int:
    location, store = _sweep_name_and_store(args)
    name = location.name
    manifest = store.read_manifest(name, reader=True)  # damaged: warned of, read as {}
    if manifest is None:
        from sweeper.results.lease import describe, holder_of

        holder = holder_of(store, name)
        if holder is None:
            raise SweeperInputError(f"SWEEP: got {shown(name)}; no sweep of that name under "
                                    f"{store.uri}")
        if args.json:  # a driver has started and written nothing yet (Ray starting, a probe)
            print(json.dumps({"sweep": name, "done": 0, "failed": 0, "running": 0,
                              "pending": None, "planned": None, "status": {},
                              "driver": "starting", "state": "starting", "updated": None,
                              "age_s": None}))
        else:
            print(f"{name}: starting: a driver ({describe(holder)}) holds the sweep and has "
                  "stored nothing yet")
        return 0
    counts = store.status_counts(name)
    progress = _progress(store, name, manifest, location.file)
    driver = progress.state
    updated = progress.updated or manifest.get("updated")
    if args.json:
        print(json.dumps({"sweep": name, "done": progress.done, "failed": progress.failed,
                          "running": progress.running, "pending": progress.pending,
                          "planned": progress.planned, "status": counts, "driver": driver,
                          "state": driver,  # the name `run --json` gives it (progress.state)
                          "updated": updated, "age_s": progress.age_s}))
        return 0
    seen = (f" (driver seen {progress.age_s:.0f} s ago)"
            if driver in ("running", "stalled") and progress.age_s is not None else "")
    planned = "" if progress.planned is None else f"; {progress.planned} planned"
    stopped = (" before its plan was done (run the same command to resume)"
               if driver == "interrupted" else "")
    print(f"{name}: {progress.line()} "
          f"({', '.join(f'{n} {s}' for s, n in sorted(counts.items())) or 'nothing stored'})"
          f"{planned}; {driver}{stopped}{seen}; updated {updated or '-'}")
    return 0


def _progress(store, name: str, manifest: dict, file: str | None):
    """The sweep's progress (`sweeper.plan.plan_progress`, the one definition): against the
    sweep file as it is now when one is given, else the file the manifest stored; by the
    manifest's trial count when neither expands."""
    from sweeper.plan import make_plan, plan_progress
    from sweeper.results.summary import manifest_progress, read_progress
    from sweeper.search_space import parse_sweep

    progress = read_progress(store.fs, store.path(name))
    if file is not None:
        sweep = _load(file)  # pending against the file as it is now
    else:
        sweep = parse_sweep(manifest["sweep_file"]) if manifest.get("sweep_file") else None
    if sweep is not None:
        return plan_progress(make_plan(sweep, set()), store, name, progress)
    return manifest_progress(store.status_counts(name), progress, manifest)


def cmd_compact(args: argparse.Namespace) -> int:
    location, store = _sweep_name_and_store(args)
    name = location.name
    if store.read_manifest(name, reader=True) is None and not store.files(name, "trials"):
        raise SweeperInputError(f"SWEEP: got {shown(name)}; no sweep of that name under "
                                f"{store.uri}")
    from sweeper.results.lease import acquire

    with acquire(store, name):  # never while a driver writes the sweep
        before, rows = store.compact(name)
    after = len(store.files(name, "trials"))
    if args.json:
        print(json.dumps({"sweep": name, "files_before": before, "files_after": after,
                          "trials": rows, "compacted": before > after}))
        return 0
    print(f"{name}: {before} trial files merged into {after} ({count(rows, 'trial')})"
          if before > after else f"{name}: nothing to compact ({count(before, 'file')})")
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from sweeper.executors.ray_tune import submit_job

    sweep = _load(args.file)  # validated here, before anything is sent
    extra = ["--results", args.results] if args.results else []
    if args.pack_size:
        extra += ["--pack-size", str(args.pack_size)]
    if args.results_shared:
        extra.append("--results-shared")
    return submit_job(args.address, args.file, sweep.name, extra, sys.stdout, args.env)


def register(sub: argparse._SubParsersAction) -> None:
    from sweeper.executors import EXECUTORS
    from sweeper.numbers import int_argument
    from sweeper.overrides import set_item
    from sweeper.sweep_fields import MAX_CPUS, MAX_PACK_SIZE, MAX_RETRIES

    p = sub.add_parser("plan", help="show what a sweep file expands to; runs nothing")
    p.add_argument("file")
    p.add_argument("--pack-size", type=int_argument(1, MAX_PACK_SIZE),
                   help="specs per pack, as run's --pack-size (default: automatic)")
    p.add_argument("--results", help=f"results root (default: the file's, else {DEFAULT_RESULTS})")
    p.add_argument("--rows", type=int_argument(0, 1_000_000), default=10,
                   help="trials to list (default 10)")
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="the executor the estimate is for, as run's --executor (default: as "
                        "run chooses it)")
    p.add_argument("--num-cpus", type=int_argument(1, MAX_CPUS),
                   help="CPUs of the embedded Ray, as run's --num-cpus (default: all)")
    p.add_argument("--workers", type=int_argument(1, MAX_CPUS),
                   help="packs training at once, for the automatic pack size and the "
                        "estimate (default: the executor's: local 1, Ray its CPUs / "
                        "resources.cpu)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", type=set_item,
                   help=SET_HELP)
    p.add_argument("--address", help="the Ray cluster the sweep will run on (as run's "
                   "--address): this machine's device and memory are not checked, and the "
                   "estimate comes only from stored trials (no timed probe here)")
    p.add_argument("--no-estimate", action="store_true",
                   help="skip the wall-time estimate")
    p.add_argument("--probe", action="store_true",
                   help="time a probe pack of each shape when nothing of it is stored or "
                        "probed in the last hour (default: estimate from those only, in "
                        "seconds)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)
    p.add_argument("--extend", action="store_true",
                   help="plan trials of a changed configuration under the sweep's name, as "
                        "run --extend (without it, plan refuses what run would)")
    p.add_argument("--results-shared", action="store_true",
                   help="the local results path is a filesystem every node shares (as run's)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("run", help="run a sweep (embedded local Ray unless --address)")
    p.add_argument("file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", type=set_item,
                   help=SET_HELP)
    p.add_argument("--wait", action="store_true",
                   help="if another driver runs this sweep, wait for it instead of exiting")
    p.add_argument("--extend", action="store_true",
                   help="store trials of a changed configuration under the sweep's name")
    p.add_argument("--json", action="store_true", help="print the final summary as JSON")
    p.add_argument("--no-estimate", action="store_true",
                   help="train without the wall-time estimate first (its timed probe trains a "
                        "few steps when nothing of the sweep's shape is stored or probed in "
                        "the last hour)")
    p.add_argument("--results", help=f"results root (default: the file's, else {DEFAULT_RESULTS})")
    p.add_argument("--address", help="an existing Ray cluster (e.g. auto, or HEAD:6379)")
    p.add_argument("--pack-size", type=int_argument(1, MAX_PACK_SIZE),
                   help="specs per pack (default: automatic)")
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="ray (Ray Tune) or local (in this process, no Ray); default: ray, or "
                        "local when what is left to train is one pack (said in one line)")
    p.add_argument("--num-cpus", type=int_argument(1, MAX_CPUS),
                   help="CPUs of the embedded Ray (default: all)")
    p.add_argument("--workers", type=int_argument(1, MAX_CPUS),
                   help="packs training at once, as plan's --workers (default: the "
                        "executor's: local 1, Ray its CPUs / resources.cpu)")
    p.add_argument("--retries", type=int_argument(0, MAX_RETRIES),
                   help="override the file's retries")
    p.add_argument("--device", help="override the file's device: cpu, cuda or cuda:N")
    p.add_argument("--results-shared", action="store_true",
                   help="the local results path is a filesystem every node shares")
    p.add_argument("-v", "--verbose", action="store_true", help="show the workers' output")
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)
    p.set_defaults(func=cmd_run)

    for name, func, text in (("status", cmd_status, "done / failed / pending counts"),
                             ("compact", cmd_compact, "merge a sweep's small Parquet files")):
        p = sub.add_parser(name, help=text)
        p.add_argument("sweep", metavar="SWEEP", help=SWEEP_FORMS)
        p.add_argument("--results", help=f"results root (default: the sweep file's, else "
                                         f"{DEFAULT_RESULTS})")
        p.add_argument("--json", action="store_true", help="print the counts as JSON"
                       if name == "status" else "print what was merged as JSON")
        p.set_defaults(func=func)

    p = sub.add_parser("submit", help="submit a sweep as a Ray job and stream its progress")
    p.add_argument("file")
    p.add_argument("--address", required=True, help="the job server, http://HEAD:8265")
    p.add_argument("--results", help="results root every node reaches (s3://..., or a shared "
                   "path with --results-shared)")
    p.add_argument("--pack-size", type=int_argument(1, MAX_PACK_SIZE),
                   help="specs per pack (default: automatic)")
    p.add_argument("--results-shared", action="store_true",
                   help="the local results path is a filesystem every node shares")
    p.add_argument("--env", action="append", default=[], metavar="NAME",
                   help="an environment variable to pass to the job (repeatable)")
    p.set_defaults(func=cmd_submit)
