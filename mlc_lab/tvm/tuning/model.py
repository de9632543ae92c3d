"""The tuning job's cost model: meta_schedule's XGBoost, predicting from the second batch, with each
distinct candidate's features extracted once per job, and trained on a database's records before
a continued or warm-started run's first round (see docs/measuring.md, "What the tuning job does")."""

from __future__ import annotations

import sys
import threading
from typing import Any

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from mlc_lab import timeline

XGB_PATIENCE = 10  # boosting rounds without improvement before XGBoost stops (meta_schedule: 50)


class CachedFeatures:
    """A feature extractor that extracts each distinct candidate's features once per job.

    The evolutionary search asks the cost model about its whole population at every genetic step,
    and most of that population was asked about before: survivors, unmutated copies, the
    database's best seeding each round, and the measured candidates the model then trains on (in a
    64-trial 128^3 run, 409 of 608 candidates predicted had been predicted before). Extracting
    features lowers each candidate; the features depend only on the candidate's module and the
    task (its module and target), so a repeat gets the features extracted the first time: the
    same arrays, the same predictions, less work."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._cache: dict[tuple, list[list]] = {}  # (task, module hash) -> [[module, features], ...]
        self.hits = 0

    def extract_from(self, context: Any, candidates: list) -> list:
        from tvm_ffi import structural_equal, structural_hash

        task = (structural_hash(context.mod), str(context.target))
        slots: list[list] = []
        todo: list[int] = []  # the first of each kind not seen before: extracted now
        for i, cand in enumerate(candidates):
            mod = cand.sch.mod
            entries = self._cache.setdefault((task, structural_hash(mod)), [])
            entry = next((e for e in entries if structural_equal(e[0], mod)), None)
            if entry is None:
                entry = [mod, None]
                entries.append(entry)
                todo.append(i)
            else:
                self.hits += 1  # seen before, or earlier in this very call
            slots.append(entry)
        if todo:
            try:
                extracted = self.inner.extract_from(context, [candidates[i] for i in todo])
            except BaseException:
                for key, entries in self._cache.items():  # nothing half-made stays cached
                    self._cache[key] = [e for e in entries if e[1] is not None]
                raise
            for i, features in zip(todo, extracted):
                slots[i][1] = features
        return [entry[1] for entry in slots]


@derived_object
class EarlyXGB(ms.cost_model.PyCostModel):
    """meta_schedule's XGBoost cost model, put to work early and spared pointless training.

    Stock meta_schedule predicts *random* scores until its model has seen 100 candidates
    (`num_warmup_samples`), yet trains it after every batch: a 64-trial run pays for four trainings
    and is never guided by them. Here the model predicts as soon as it has seen one batch, and the
    training after the run's last batch (which no round would use) is skipped."""

    def __init__(self, total: int, warmup: int, cores: int) -> None:
        super().__init__()
        from tvm.s_tir.meta_schedule.cost_model.xgb_model import XGBConfig

        # One XGBoost thread: the model trains on a few dozen candidates, and with one OpenMP
        # thread per core on a 2-core machine that is also running anything else, its threads
        # spin-wait for each other: 3 trainings took 20 s with 2 threads, 4 s with 1 (load 8).
        # Training stops 10 rounds after the last improvement instead of 50 (the best round is
        # the same, the predicted ranking identical on held-out trials; 4 s -> 2.3 s).
        self.inner = ms.cost_model.XGBModel(
            num_warmup_samples=warmup,
            num_tuning_cores=cores,
            config=XGBConfig(nthread=1),
            early_stopping_rounds=XGB_PATIENCE,
        )
        self.inner.extractor = CachedFeatures(self.inner.extractor)
        self.total = total  # candidates this run will measure
        self.seen = 0

    def load(self, path: str) -> None:
        self.inner.load(path)

    def save(self, path: str) -> None:
        self.inner.save(path)

    def update(self, context: Any, candidates: list, results: list) -> None:
        self.seen += len(candidates)
        if self.seen >= self.total:
            return  # the run's last batch: no round will ask the model again
        with timeline.span("xgb_update", n=len(candidates)):
            self.inner.update(context, candidates, results)

    def predict(self, context: Any, candidates: list) -> Any:
        with timeline.span("xgb_predict", n=len(candidates)):
            return self.inner.predict(context, candidates)


def import_in_background(name: str) -> threading.Thread:
    def load() -> None:
        try:
            with timeline.span("import", module=name):
                __import__(name)
        except Exception:  # noqa: BLE001 - whoever needs it imports it again and says why it failed
            pass

    thread = threading.Thread(target=load, name=f"import {name}", daemon=True)
    thread.start()
    return thread


def make_cost_model(name: str, remaining: int, per_iter: int, cores: int) -> Any:
    if name != "xgb":
        return name
    return EarlyXGB(total=remaining, warmup=max(1, min(per_iter, 100)), cores=cores)


def warm_cost_model(task_mod: Any, target: Any, db: Any, workload: Any, cores: int, model: Any = None) -> Any:
    """An XGB cost model already trained on the trials in the database.

    When a run continues (or starts from a shared database), meta_schedule seeds its evolutionary
    search with the best records of the database, but its cost model starts empty; we train it on
    every recorded trial first, so the search is guided from its first round. Falls back to a
    fresh model on any failure.
    """
    model = model if model is not None else ms.CostModel.create("xgb", num_tuning_cores=cores, tree_method="auto")
    try:
        records = [r for r in db.get_top_k(workload, 100000) if r.run_secs and max(float(x) for x in r.run_secs) < 1e9]
        if not records:
            return model
        ctx = ms.TuneContext(mod=task_mod, target=target, task_name="main", num_threads=cores)
        candidates, results = [], []
        for rec in records:
            sch = tvm.s_tir.Schedule(task_mod)
            rec.trace.apply_to_schedule(sch, remove_postproc=False)
            candidates.append(ms.MeasureCandidate(sch, rec.args_info))
            results.append(ms.runner.RunnerResult(run_secs=rec.run_secs, error_msg=None))
        inner = getattr(model, "inner", model)  # train the XGB model itself (EarlyXGB counts only this run's)
        inner.update(ctx, candidates, results)
        print(f"mlc_lab: cost model warmed up on {len(records)} recorded trials", file=sys.stderr)
        return model
    except Exception as exc:  # noqa: BLE001 - a cold model still tunes
        print(f"mlc_lab: could not warm the cost model from the database ({exc}); starting cold", file=sys.stderr)
        return model
