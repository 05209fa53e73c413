"""What the dashboard shows of one sweep, as plain JSON-able data (the server only routes).

- Phase diagrams come from the sweep's cell summary (`sweeper.results.summary`,
  cells.parquet), brought up to date with the committed trials files by name: a new pack
  costs one small read, trajectories are never scanned (`SweepView.phase`).
- The trials table is cached in memory and grown file by file as packs land (files are
  immutable), for a cell's trials, failed trials and the objective of a search.
- A cell's curves read only the trajectories files of its trials' packs, filtered by trial id.
- The trials table the page lists is `sweeper query`'s (`query_frame`, its default columns and
  where language), read again only when a pack landed or the filter or sort changed.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from sweeper.numbers import shown
from sweeper.results import DEFAULT_THRESHOLDS, SUCCESS_OUTCOMES
from sweeper.results.conformance import Footer, read_as
from sweeper.results.layout import COMPACT_PREFIX, STUDY_FILE, part_name
from sweeper.results.reading import (
    current_names,
    list_folder,
    part_files,
    read_manifest,
    to_frame,
    warn_damaged,
)
from sweeper.results.store import conforming, scan_folder
from sweeper.results.summary import (
    CellSummary,
    current_rows,
    current_summary,
    manifest_progress,
    outcome_columns,
    read_progress,
    read_summary,
    read_trial_files,
    rows_of_packs,
)

from ..axes import (
    AxisScale,
    axis_label,
    axis_scale,
    category_scale,
    is_log_spaced,
    is_numeric,
    tick,
)
from ..errors import AnalysisInputError
from ..phase import (
    DEFAULT_BINS,
    AxisBins,
    axis_bins,
    default_axes,
    manifests_draw_cells,
    phase_from_summary,
)
from ..search import (
    history,
    is_yes_no,
    objective_cells,
    optuna_importance,
    search_info,
    slices,
    spread_importance,
    trial_lines,
)
from ..swept import declared_axes, swept_columns

MAX_CURVES = 200  # seeds drawn per cell
TABLE_PAGE = 1000  # trials table rows a request returns unless it asks for another page size


def plain(value: Any) -> Any:
    """JSON-able: numpy scalars to Python, NaN and NA to None."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if value is None or value is pd.NA:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class SweepView:
    """One sweep folder, read as packs land. Thread-safe (the server's threads share it)."""

    def __init__(self, fs: pafs.FileSystem, root: str, name: str):
        self.fs, self.root, self.name = fs, root, name
        self.folder = f"{root}/{name}"
        self.lock = threading.RLock()
        self.summary: CellSummary | None = None
        self.names: tuple[str, ...] | None = None  # committed trials files the summary covers
        self.packs: dict[str, frozenset[str]] = {}  # the packs each of them holds
        self.superseded: frozenset[str] = frozenset()  # failed trials stored again
        self.revision = 0
        self._checked: dict[str, Footer] = {}  # footers read (files are immutable)
        self._trials: pd.DataFrame | None = None
        self._trial_packs: set[str] = set()  # the packs self._trials holds
        self._manifest: dict = {}
        self._warming: threading.Thread | None = None
        self.trials_lock = threading.Lock()
        self._manifest_at = 0.0
        self._table: tuple[tuple, pd.DataFrame] | None = None  # the last table asked for

    # ---------------------------------------------------------------- keeping up
    def committed(self) -> list[str]:
        """The committed trials files (names), by the commit rule on one listing
        (`scan_folder`: each file's footer read once); a damaged or foreign file is left out
        with one warning line."""
        scan = scan_folder(self.fs, self.folder, self._checked, trajectories=False)
        for path, why in scan.damaged.items():
            warn_damaged(path, why)
        self.packs = scan.packs  # what each file holds: a merged file, the packs it merged
        self.superseded = scan.superseded
        return [path.rsplit("/", 1)[1] for path in scan.files["trials"]]

    def trajectory_footers(self, names: Iterable[str]) -> dict[str, Footer]:
        """The trajectories files of these names that are whole files of the table, with their
        footers (`conforming`); a damaged or foreign one is left out with one warning line."""
        stored = part_files(self.fs, f"{self.folder}/trajectories")
        wanted = {f"{self.folder}/trajectories/{n}": stored[n] for n in names if n in stored}
        damaged: dict[str, str] = {}
        readable = conforming(self.fs, wanted, "trajectories", self._checked, damaged)
        for path, why in damaged.items():
            warn_damaged(path, why)
        return readable

    def refresh(self) -> int:
        """`_refresh`, listed again when a file listed is gone before it is read (a merge's
        input deleted meanwhile)."""
        try:
            return self._refresh()
        except FileNotFoundError:
            return self._refresh()

    def _refresh(self) -> int:
        """Bring the summary up to date (one listing when nothing landed); returns the
        revision, which changes whenever a pack has landed. The writer's cells.parquet is read
        when it changed; trials files it does not cover yet are read and added."""
        with self.lock:
            names = tuple(self.committed())
            if names != self.names:
                held = frozenset().union(*(self.packs.get(n) or {n} for n in names))
                mine = self.summary if self.summary is not None and \
                    self.summary.files <= held else None
                theirs = read_summary(self.fs, self.folder)
                if theirs is not None and not theirs.files <= held:
                    theirs = None  # covers a pack no longer stored (quarantine): rebuild
                base = max((s for s in (mine, theirs) if s is not None),
                           key=lambda s: len(s.files), default=None)
                self.summary, _ = current_summary(self.fs, self.folder, names, base,
                                                  packs=self.packs,
                                                  superseded=self.superseded)
                self.names = names
                self.revision += 1
            return self.revision

    def manifest(self) -> dict:
        now = time.monotonic()
        if now - self._manifest_at > 5.0 or not self._manifest:
            self._manifest = read_manifest(self.fs, self.folder, reader=True) or {}
            self._manifest_at = now
        return self._manifest

    def trials(self) -> pd.DataFrame:
        """Every stored trial (all columns), grown by the files that landed since last time
        (listed again when a file listed is gone before it is read)."""
        try:
            return self._trials_now()
        except FileNotFoundError:
            return self._trials_now()

    def _trials_now(self) -> pd.DataFrame:
        with self.trials_lock:
            names = self.committed()
            holds = {n: self.packs.get(n) or frozenset((n,)) for n in names}
            packs = frozenset().union(*holds.values())

            def read(files):
                return read_trial_files(self.fs, self.folder, files)
            if self._trials is None or not packs >= self._trial_packs:
                self._trials = read(sorted(names))
            elif packs - self._trial_packs:  # a merge of packs read before reads nothing
                new = rows_of_packs(read, holds, packs - self._trial_packs)
                self._trials = pd.concat([self._trials, new], ignore_index=True)
            self._trial_packs = set(packs)
            return current_rows(self._trials, self.superseded)  # as every reader counts

    # ---------------------------------------------------------------- what is shown
    def outcome(self) -> str:
        named = self.manifest().get("outcome")
        have = [o for o in SUCCESS_OUTCOMES if self.summary is not None
                and outcome_columns(o)[0] in self.summary.cells.columns]
        return named if named in have else (have[0] if have else "learned")

    def axes(self) -> list[dict]:
        """The parameters that vary (the sweep's axes, not the columns derived from them:
        `analysis.swept`), each with how it is drawn."""
        cells = self.summary.cells if self.summary is not None else pd.DataFrame()
        info = search_info(self.manifest())
        drawn = manifests_draw_cells([self.manifest()])
        out = []
        asked = declared_axes(self.manifest()) or set()
        for column in dict.fromkeys([*swept_columns(cells, {self.name: self.manifest()}),
                                     *(c for c in cells.columns if c in asked)]):
            values = _sorted(cells[column].dropna().unique().tolist())
            if len(values) < 2 and column not in asked:  # a declared axis: from its first
                continue  # pack on, so that the view keeps its axes as packs land
            declared = info.axes.get(column)
            numeric = is_numeric(values)
            log = numeric and (declared == "loguniform" or (declared is None and
                                                              is_log_spaced(values)))
            kind = "log" if log else "linear" if numeric else "category"
            out.append({"column": column, "label": axis_label(column), "kind": kind,
                        "levels": len(values),
                        "binned": drawn and _axis_bins(cells, column, [column]) is not None})
        return out

    def state(self) -> dict:
        revision = self.refresh()
        manifest = self.manifest()
        summary = self.summary
        cells = summary.cells if summary is not None else pd.DataFrame()
        counts = {c: int(cells[c].sum()) if c in cells.columns else 0
                  for c in ("n_trials", "ok", "diverged", "failed", "stopped")}
        statuses = {c: counts[c] for c in ("ok", "diverged", "failed", "stopped") if counts[c]}
        progress = manifest_progress(statuses, read_progress(self.fs, self.folder), manifest)
        axes = self.axes()
        try:
            x, y, facet = (default_axes(cells, {self.name: manifest}) if len(cells)
                           else (None, None, None))
        except AnalysisInputError:
            x, y, facet = (axes[0]["column"] if axes else None,
                           axes[1]["column"] if len(axes) > 1 else None, None)
        info = search_info(manifest)
        return plain({
            "sweep": self.name, "revision": revision, "stored": counts["n_trials"],
            "counts": counts, "progress": progress.to_json(),
            "outcome": self.outcome(),
            "outcomes": [o for o in SUCCESS_OUTCOMES if outcome_columns(o)[0] in cells.columns
                         and int(cells[outcome_columns(o)[0]].sum()) > 0],
            "axes": axes, "default": {"x": x, "y": y, "facet": facet},
            "search": {"type": info.type, "objective": info.objective,
                       "direction": info.direction, "drawn": info.drawn or any(
                           a["binned"] for a in axes)},
            "task": manifest.get("task"), "model": manifest.get("model"),
            "expanded": manifest.get("trials_expanded")})

    def warm(self) -> None:
        """Read the trials table in the background (failed trials, a search's objective)."""
        if self._warming is None:
            self._warming = threading.Thread(target=self._quiet_trials, daemon=True)
            self._warming.start()

    def _quiet_trials(self) -> None:
        try:
            self.trials()
        except Exception:  # noqa: BLE001 - read again, loudly, by the request that needs it
            pass

    def phase(self, x: str, y: str, facet: str | None, outcome: str | None = None,
              min_seeds: int = 3) -> dict:
        self.refresh()
        if self.summary is None or self.summary.cells.empty:
            return {"empty": True, "revision": self.revision}
        cells = self.summary.cells
        for column in (x, y, facet):
            if column is not None and column not in cells.columns:
                raise AnalysisInputError(f"unknown axis {column!r}")
        outcome = outcome or self.outcome()
        info = search_info(self.manifest())
        frame, bins = cells.copy(), {}
        drawn = manifests_draw_cells([self.manifest()])
        for column in (x, y) if drawn else ():  # a grid's values are its cells; the facet
            made = _axis_bins(cells, column, [a for a in (x, y, facet) if a])  # keeps its own
            if made is not None:
                values = _sorted(frame[column].dropna().unique().tolist())
                log = info.axes.get(column) == "loguniform" or is_log_spaced(values)
                frame[column], bins[column] = _at_bin_centres(frame[column], made, log)
        threshold = (DEFAULT_THRESHOLDS.attention_learned if outcome == "attention_learned"
                     else DEFAULT_THRESHOLDS.accuracy)  # the stored outcomes' thresholds
        phase = phase_from_summary(frame, x, y, facet, outcome=outcome, min_seeds=min_seeds,
                                   accuracy_threshold=threshold)
        scales = info.scales()
        gx = _grid_axis(x, phase.x_values, scales, bins)
        gy = _grid_axis(y, phase.y_values, scales, bins)
        facets = []
        for value in phase.facet_values:
            part = phase.facet_cells(value)
            grid = {c: phase.grid(c, value).tolist() for c in
                    ("p", "n", "successes", "n_trials", "n_shared", "state", "p_low", "p_high")}
            index = np.full((len(phase.y_values), len(phase.x_values)), -1)
            index[part["iy"].to_numpy(), part["ix"].to_numpy()] = part.index.to_numpy()
            facets.append({"value": value, "label": _facet_label(facet, value),
                           "grid": grid, "index": index.tolist()})
        boundary = []
        for row in phase.boundary.itertuples(index=False):
            f = getattr(row, "_0", None) if facet else None
            boundary.append({"facet": phase.facet_values.index(f) if facet else 0,
                             "x": [gx.pos(row.edge_x0), gx.pos(row.edge_x1)],
                             "y": [gy.pos(row.edge_y0), gy.pos(row.edge_y1)]})
        if facet is not None:  # itertuples renames the dotted facet column: read it by name
            values = phase.boundary[facet].tolist()
            for b, v in zip(boundary, values, strict=True):
                b["facet"] = phase.facet_values.index(v)
        from ..axes import phase_title

        return plain({
            "revision": self.revision, "title": phase_title(phase), "outcome": outcome,
            "min_seeds": min_seeds, "facet": facet, "facet_label": axis_label(facet),
            "x": _axis_json(gx, bins.get(x)), "y": _axis_json(gy, bins.get(y)),
            "facets": facets, "boundary": boundary, "recovery": _recovery_maps(phase),
            "cells": [_cell_json(phase, i, row, bins) for i, row in phase.cells.iterrows()],
            "states": phase.cells["state"].value_counts().to_dict(),
            "excluded": phase.excluded})

    def cell(self, conditions: Sequence[Mapping], metrics: Sequence[str] | None = None,
             where: str | None = None) -> dict:
        """A cell's trials (any status) and their curves: the summary names the cell's trials
        and packs, so only those packs' files are read. `where`: the trials table's filter
        (`sweeper query`'s language), which the drill-down follows: a trial it hides is not
        drawn (`filtered`: how many it left out)."""
        trials = self._cell_trials(conditions)
        chosen = trials[_matching(trials, conditions, strict=True)]
        filtered = 0
        if where:
            kept = self._whole_table(where, None, False)
            keep = chosen["trial_id"].isin(set(kept["trial_id"]) if kept is not None else ())
            filtered, chosen = int((~keep).sum()), chosen[keep]
        outcome = self.outcome()
        metrics = list(metrics or self.seed_metrics())
        from ..seeds import metric_thresholds, outcome_class

        classes = outcome_class(chosen, outcome)
        steps_column = SUCCESS_OUTCOMES[outcome]
        sort = [c for c in ("seed", "trial_id") if c in chosen.columns]
        order = chosen.assign(_class=classes).sort_values(sort)
        drawn = order.head(MAX_CURVES)
        curves = self._curves(drawn, metrics)
        varying = [a["column"] for a in self.axes()]
        rows = []
        for _, t in order.iterrows():
            error = t.get("error")
            rows.append({
                "trial_id": t["trial_id"], "seed": t.get("seed"), "status": t.get("status"),
                "class": t["_class"], "outcome": t.get(outcome),
                "steps": t.get(steps_column), "attempts": t.get("attempts"),
                "error": error if isinstance(error, str) else None,
                "shared_with": t.get("shared_with") if isinstance(t.get("shared_with"), str)
                else None,
                "config": {c: t.get(c) for c in varying},
                **{f"final_{m}": t.get(f"final_{m}") for m in metrics}})
        thresholds = metric_thresholds(DEFAULT_THRESHOLDS)
        return plain({
            "outcome": outcome, "metrics": [{"name": m, "label": axis_label(m),
                                             "threshold": thresholds.get(m)} for m in metrics],
            "trials": rows, "curves": curves, "shown": len(drawn), "total": len(order),
            "filtered": filtered,
            "successes": int((classes == "success").sum()),
            "counted": int(classes.isin(["success", "failure", "diverged"]).sum())})

    def _cell_trials(self, conditions: Sequence[Mapping]) -> pd.DataFrame:
        """The trials rows of the summary rows that meet `conditions` (their packs' files,
        filtered by trial id); the whole trials table where the summary has no ids."""
        self.refresh()
        cells = self.summary.cells if self.summary is not None else pd.DataFrame()
        if "trial_ids" not in cells.columns or "packs" not in cells.columns:
            return self.trials()
        rows = cells[_matching(cells, conditions, strict=False)]  # trials columns (seed...):
        # the caller filters by them
        ids = [t for v in rows["trial_ids"] for t in v]
        packs = {p for v in rows["packs"] for p in v}
        if not ids:
            return self.trials().iloc[0:0]
        names = set(self.names or ())
        files = [f"{self.folder}/trials/{n}" for n in sorted(names)
                 if n.startswith(COMPACT_PREFIX) or n in {part_name(p) for p in packs}]
        table = ds.dataset(files, filesystem=self.fs, format="parquet").to_table(
            filter=pc.field("trial_id").isin(pa.array(ids, pa.string())))
        return to_frame(current_names(table))

    def seed_metrics(self) -> list[str]:
        from sweeper.errors import SweeperInputError
        from sweeper.families import family_of

        try:
            return list(family_of(str(self.manifest().get("task"))).seed_metrics)
        except SweeperInputError:
            return ["accuracy"]

    def metrics(self) -> list[str]:
        """The scalar trajectory columns (from one file's schema)."""
        for name in self.committed():  # the first readable file's (a damaged one is skipped)
            for footer in self.trajectory_footers([name]).values():
                return [f.name for f in footer.schema if f.name not in ("trial_id", "step")
                        and pa.types.is_floating(f.type)]
        return []

    def _curves(self, trials: pd.DataFrame, metrics: list[str]) -> dict:
        """Each trial's trajectory; a trial that shares an equivalent trial's training
        (`shared_with`) gets that training's, stored once under its id."""
        if trials.empty:
            return {}
        asked = list(trials["trial_id"])
        source = {t: s for t, s in zip(trials["trial_id"], trials["shared_with"])
                  if isinstance(s, str)} if "shared_with" in trials.columns else {}
        if source:  # the trainings, with the packs that hold them
            everyone = self.trials()
            trials = pd.concat([trials, everyone[everyone["trial_id"].isin(
                set(source.values()))]], ignore_index=True)
        names = set(self.names or self.committed())
        packs = set(trials["pack_id"].dropna()) if "pack_id" in trials.columns else set()
        footers = self.trajectory_footers(n for n in sorted(names) if n.startswith(COMPACT_PREFIX)
                                          or n in {part_name(p) for p in packs})
        if not footers:
            return {}
        data = ds.dataset(list(footers), filesystem=self.fs, format="parquet",
                          schema=read_as(footers.values()))
        have = set(data.schema.names)
        wanted = [m for m in metrics if m in have]
        table = data.to_table(columns=["trial_id", "step", *wanted],
                              filter=pc.field("trial_id").isin(pa.array(
                                  trials["trial_id"].tolist(), pa.string())))
        frame = table.to_pandas().sort_values(["trial_id", "step"])
        curves = {tid: {"step": g["step"].tolist(), **{m: g[m].tolist() for m in wanted}}
                  for tid, g in frame.groupby("trial_id", sort=False)}
        return {tid: curves[source.get(tid, tid)] for tid in asked
                if source.get(tid, tid) in curves}

    def table(self, where: str | None = None, sort: str | None = None,
              descending: bool = False, offset: int = 0, limit: int = TABLE_PAGE) -> dict:
        """The trials (those `where` selects, `sweeper query`'s filter language) with the
        columns `sweeper query` prints by default (`query_frame(columns=DEFAULT)`), sorted by
        the swept columns and seed, or by `sort`: `limit` rows from `offset` of the `matched`
        ones (a page: a sweep of thousands of trials is not sent whole at every pack)."""
        frame = self._whole_table(where, sort, descending)
        if frame is None:
            return {"columns": [], "rows": [], "total": 0, "revision": self.revision,
                    "offset": offset, "limit": limit, "matched": 0}
        page = frame.iloc[offset:offset + limit]  # only the page is turned into JSON
        return {**plain({"columns": list(frame.columns), "total": self.summary_trials(),
                         "rows": page.to_numpy(dtype=object).tolist(),
                         "revision": self.revision}),
                "offset": offset, "limit": limit, "matched": len(frame)}

    def _whole_table(self, where: str | None, sort: str | None,
                     descending: bool) -> pd.DataFrame | None:
        """Every matching row, sorted, kept for the next page of the same question."""
        from ..query import DEFAULT, query_frame

        self.refresh()
        if not self.names:
            return None
        key = (self.revision, where, sort, descending)
        if self._table is not None and self._table[0] == key:  # the page asks again per pack
            return self._table[1]
        frame = query_frame(self.root, self.name, where=where or None, columns=DEFAULT,
                            filesystem=self.fs)
        if sort is not None:
            if sort not in frame.columns:
                raise AnalysisInputError(f"sort: got {shown(sort)}; allowed: "
                                         f"{', '.join(frame.columns)}")
            frame = frame.sort_values(sort, ascending=not descending, kind="stable",
                                      na_position="last", ignore_index=True)
        self._table = (key, frame)
        return frame

    def summary_trials(self) -> int:
        cells = self.summary.cells if self.summary is not None else pd.DataFrame()
        return int(cells["n_trials"].sum()) if "n_trials" in cells.columns else 0

    def curves(self, trial_ids: Sequence[str], metrics: Sequence[str] | None = None) -> dict:
        """The curves of the trials named (for the overlay of the table's selected rows)."""
        trials = self.trials()
        known = set(trials["trial_id"])
        unknown = [t for t in trial_ids if t not in known]
        if unknown:
            raise AnalysisInputError(f"trials: no trial {shown(unknown[0])} in sweep "
                                     f"{self.name}; allowed: trial ids of its trials table")
        chosen = trials[trials["trial_id"].isin(set(trial_ids))]
        metrics = list(metrics or self.seed_metrics())
        outcome = self.outcome()
        shown_columns = [c for c in ("seed", "status", outcome, *(a["column"] for a in
                                                                  self.axes()))
                         if c in chosen.columns]
        return plain({"metrics": [{"name": m, "label": axis_label(m)} for m in metrics],
                      "columns": shown_columns,
                      "trials": {t["trial_id"]: {c: t[c] for c in shown_columns}
                                 for _, t in chosen.iterrows()},
                      "curves": self._curves(chosen, metrics)})

    def failed(self, limit: int = 500) -> dict:
        self.refresh()
        trials = self.trials()
        failed = trials[trials["status"] == "failed"] if "status" in trials.columns else trials[:0]
        varying = [a["column"] for a in self.axes()]
        rows = [{"trial_id": t["trial_id"], "seed": t.get("seed"),
                 "attempts": t.get("attempts"), "host": t.get("host"),
                 "config": {c: t.get(c) for c in varying}, "error": t.get("error")}
                for _, t in failed.head(limit).iterrows()]
        return plain({"total": len(failed), "trials": rows})

    def search(self) -> dict:
        """The search views of any sweep: the objective per cell against each parameter,
        one parallel-coordinates line per counted trial (`lines`), a slice per parameter,
        parameter importance (Optuna's own where the sweep has a study, else the spread of
        the per-value means, `spread_importance`) and, for searches, the optimisation history
        in stored order."""
        self.refresh()  # its axes come from the summary: asked first, it is read here
        info = search_info(self.manifest())
        trials = self.trials()
        objective = info.objective or self.outcome()
        axes = self.axes()
        keys = [a["column"] for a in axes]
        if not keys or objective not in trials.columns:
            return {"cells": [], "parameters": [], "lines": [], "objective": objective}
        cells = objective_cells(trials, keys, objective)
        searched = info.drawn  # a sample of cells (random, Optuna, boundary), not a grid
        # a grid's parameters are drawn at the grid's values (categorical axes)
        kinds = {a["column"]: a["kind"] if searched else "category" for a in axes}
        parameters = [{"column": a["column"], "label": a["label"], "kind": kinds[a["column"]],
                       "values": [tick(v) for v in _sorted(cells[a["column"]].dropna()
                                                            .unique().tolist())]
                       if kinds[a["column"]] == "category" else None} for a in axes]
        lines = trial_lines(self._stored_order(trials), keys, objective)
        study = self._study_importance()
        return plain({"objective": objective, "direction": info.direction or "maximize",
                      "type": info.type or "grid", "yes_no": is_yes_no(trials, objective),
                      "parameters": parameters, "cells": cells.to_dict("records"),
                      "lines": lines.to_dict("records"), "slices": slices(lines, keys),
                      "importance": {"method": "optuna" if study else "spread",
                                     "values": study or spread_importance(lines, keys)},
                      "history": history(lines, info.direction, keys) if searched else None})

    def _stored_order(self, trials: pd.DataFrame) -> pd.DataFrame:
        """The trials in the order their packs' files were committed (modification time;
        a compacted file's trials keep their order in it)."""
        if "pack_id" not in trials.columns or trials.empty:
            return trials
        infos = list_folder(self.fs, f"{self.folder}/trials")
        when = {i.base_name: i.mtime_ns or 0 for i in infos}
        at = trials["pack_id"].map(lambda p: when.get(part_name(p), math.inf)
                                   if isinstance(p, str) else math.inf)
        return trials.iloc[np.argsort(at.to_numpy(dtype=float), kind="stable")]

    def _study_importance(self) -> dict[str, float] | None:
        """Optuna's importance of the sweep's study (a local sweep's SQLite file beside its
        results, as the Optuna strategy keeps it)."""
        if not isinstance(self.fs, pafs.LocalFileSystem):
            return None
        return optuna_importance(f"{self.folder}/{STUDY_FILE}", self.name)


# ---------------------------------------------------------------- helpers

def _sorted(values: list) -> list:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=str)


def _matching(frame: pd.DataFrame, conditions: list[dict], strict: bool) -> np.ndarray:
    """Rows meeting every condition ({column, value} or {column, lo, hi}); a column the frame
    lacks is an error when `strict`, else left to the caller."""
    mask = np.ones(len(frame), dtype=bool)
    for cond in conditions:
        column = cond.get("column")
        if column not in frame.columns:
            if strict:
                raise AnalysisInputError(f"unknown column {column!r}")
            continue
        values = frame[column]
        if "lo" in cond:  # a bin [lo, hi), the last one [lo, hi] (as `AxisBins.assign`)
            numbers = pd.to_numeric(values, errors="coerce").astype(float)
            lo, hi = float(cond["lo"]), float(cond["hi"])
            below = numbers <= hi if cond.get("closed") else numbers < hi
            mask &= ((numbers >= lo) & below).to_numpy()
        elif cond.get("value") is None:
            mask &= values.isna().to_numpy()
        else:
            mask &= _equal(values, cond["value"])
    return mask


def _equal(values: pd.Series, value) -> np.ndarray:
    if isinstance(value, bool):
        return (values.astype("boolean") == value).fillna(False).to_numpy(dtype=bool)
    if isinstance(value, int | float) and pd.api.types.is_numeric_dtype(values):
        numbers = pd.to_numeric(values, errors="coerce").astype(float)
        return np.isclose(numbers.to_numpy(), float(value), rtol=1e-12, atol=0)
    return (values.astype(str) == str(value)).to_numpy()


def _axis_bins(cells: pd.DataFrame, column: str, axes: list[str]) -> AxisBins | None:
    """The bins `sweeper phase` draws a drawn sweep's axis in by default (`axis_bins`:
    DEFAULT_BINS quantile bins of the values of the trials that have every one of `axes`, of
    any status, as `compute_phase` cuts them), from the cell summary: each cell's value once
    per trial. None where the axis keeps its values."""
    values = pd.to_numeric(cells[column], errors="coerce")
    if pd.api.types.is_bool_dtype(values):
        return None
    present = cells[axes].notna().all(axis=1).to_numpy()
    repeats = np.where(present, cells["n_trials"].fillna(0).astype(int).clip(lower=0), 0)
    return axis_bins(column, pd.Series(np.repeat(values.to_numpy(float), repeats)),
                     DEFAULT_BINS)


def _at_bin_centres(column: pd.Series, bins: AxisBins, log: bool) -> tuple[pd.Series, list]:
    """Each row's bin centre (geometric on a log axis), for a map drawn on the axis's own
    scale, and the used bins' [lo, hi, closed] in order (closed: the last bin, [lo, hi])."""
    edges = np.asarray(bins.edges, dtype=float)
    centres = (np.sqrt(edges[1:] * edges[:-1]) if log and edges[0] > 0
               else (edges[1:] + edges[:-1]) / 2)
    numbers = pd.to_numeric(column, errors="coerce").astype(float)
    which = bins.index(column)
    mapped = pd.Series(centres[which], index=column.index).where(numbers.notna())
    used = sorted(set(which[numbers.notna().to_numpy()].tolist()))
    return mapped, [[float(edges[i]), float(edges[i + 1]), i == len(centres) - 1] for i in used]


def _grid_axis(column: str, values: list, scales: dict, bins: dict) -> AxisScale:
    """A grid's axis is drawn as the grid: one evenly spaced cell per value, labelled by the
    value (as the PNG's cells are); a continuous axis cut into bins keeps its numeric (or log)
    scale, the bins at their edges."""
    if column not in bins:
        return category_scale(column, values)
    return axis_scale(column, values, scales[column] == "log" if column in scales else None)


def _ticks(values: list) -> list[str]:
    """The values as tick labels (`tick`), exact where two would print alike."""
    ticks = [tick(v) for v in values]
    return ticks if len(set(ticks)) == len(ticks) else [repr(v) for v in values]


def _recovery_maps(phase) -> list[dict]:
    """The recovery map of each facet value but the base (`PhaseDiagram.recovery`, what the
    PNG's phase figure draws under its facet's panel): p(value) - p(base) where both cells
    have enough seeds, and the recovered cells (learned where the base failed)."""
    if not phase.facet or phase.recovery.empty:
        return []
    from ..axes import short_value

    maps = []
    base = short_value(phase.facet, phase.base)
    for value in phase.facet_values:
        if value == phase.base:
            continue
        rec = phase.recovery[phase.recovery[phase.facet] == value]
        maps.append({"facet": phase.facet_values.index(value),
                     "label": f"recovery: p({short_value(phase.facet, value)}) − p({base})",
                     "delta": phase.grid("delta", frame=rec).tolist(),
                     "recovered": phase.grid("recovered", frame=rec).tolist()})
    return maps


def _axis_json(scale, bins) -> dict:
    return {"column": scale.column, "label": axis_label(scale.column), "kind": scale.kind,
            "values": _ticks(scale.values) if scale.kind == "category" else scale.values,
            "raw": list(scale.values),
            "edges": scale.edges.tolist() if scale.numeric else None,
            "bins": None if bins is None else [[lo, hi] for lo, hi, _ in bins]}


def _facet_label(facet: str | None, value) -> str:
    from ..axes import value_label

    return value_label(facet, value) if facet else "all trials"


def _cell_json(phase, index: int, row: pd.Series, bins: dict) -> dict:
    conditions = []
    for column in (phase.facet, phase.x, phase.y):
        if column is None:
            continue
        value = row[column]
        if column in bins:
            span = next((b for b in bins[column] if b[0] <= float(value) <= b[1]), None)
            if span is not None:  # the last bin is closed: [lo, hi]
                conditions.append({"column": column, "lo": span[0], "hi": span[1],
                                   **({"closed": True} if span[2] else {})})
                continue
        conditions.append({"column": column, "value": value})
    return {"index": index, "ix": row["ix"], "iy": row["iy"], "state": row["state"],
            "n": row["n"], "successes": row["successes"], "n_trials": row["n_trials"],
            "n_shared": row.get("n_shared", 0), "p": row["p"], "p_low": row["p_low"],
            "p_high": row["p_high"],
            "recovered": bool(row["recovered"]), "conditions": conditions}
