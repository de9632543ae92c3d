"""The Session: one program, a tree of schedule steps, and everything the views need from it.

Every view (explorer, access view, trace editor, tuning dashboard) is a view of a Session, and
every click goes through the same methods a user calls from Python.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Callable, cast

from mlc_lab.core import display
from mlc_lab.core.history import History, Step
from mlc_lab.model.steps import Change, FailedAttempt, StepView, changed_lines
from mlc_lab.errors import DecisionError, MlcLabError, NameResolutionError, ScheduleStepError, SplitPastLoopError
from mlc_lab.model.steps import LIST_RESULTS, Decision
from mlc_lab.tvm import program, state_trace
from mlc_lab.tvm import schedule
from mlc_lab.core.step_calls import Sampled, call_label, given_label, has_sampled, jsonable
from mlc_lab.core.tilings import perfect_tilings, product
from mlc_lab.core.access.query import analysis_errors

log = logging.getLogger(__name__)

Listener = Callable[[Change], None]


class Session:
    MAX_FAILED = History.MAX_FAILED  # failed attempts kept (the oldest go first)

    def __init__(self, module: Any, func: str | None = None, *, seed: int | None = None):
        mod = program.load(module, func)
        names = program.prim_func_names(mod)
        self.func_name = func or ("main" if "main" in names else names[0])
        self._original = mod
        self._func_names = set(names)
        self._states: dict[int, schedule.State] = {0: schedule.State.initial(mod, self.func_name, seed)}
        self._history = History(max_failed=self.MAX_FAILED)  # the step tree (plain data)
        self._listeners: list[Listener] = []
        self._views: dict[int, StepView] = {}  # built once, when a step is first looked at
        self._added: list[int] = []  # steps made since the last notification (the history delta)
        self.measurements: dict[int, Any] = {}  # step id -> Measurement
        self._lowerings: dict[tuple[int, str], Any] = {}  # (step id, target) -> Lowering (a step never changes)
        self._way_splits: set[tuple[str, str]] = set()  # (program hash, label): splits past a loop a way holds

    # --- construction from traces --------------------------------------------------------------
    @classmethod
    def from_trace(cls, module: Any, trace: Any, func: str | None = None, *, seed: int | None = None) -> "Session":
        """A session of ``module`` with ``trace`` replayed: a path to a trace file, TVM's printed trace
        or a pasted ``apply_trace`` function, its JSON, ``sch.trace``, or a meta_schedule tuning
        record (a database line or its JSON). The trace is parsed by a whitelist, never executed."""
        session = cls(module, func, seed=seed)
        session.replay(trace)
        return session

    # --- the program ----------------------------------------------------------------------------
    @property
    def original(self) -> Any:
        return self._original

    @property
    def module(self) -> Any:
        return self._state.mod

    @property
    def _state(self) -> schedule.State:
        return self._states[self._history.current_id]

    @property
    def script(self) -> str:
        return self._state.script

    def script_of_function(self, name: str) -> str:
        """TVMScript of one function of the current program."""
        from mlc_lab.tvm.program import function_script

        return function_script(self.module, name)

    def script_at(self, step: int) -> str:
        return self.state_at(step).script

    def module_at(self, step: int) -> Any:
        return self.state_at(step).mod

    @property
    def trace(self) -> str:
        return state_trace.printed(self._state)

    @property
    def trace_json(self) -> list:
        return self._state.trace_json()

    @property
    def trace_python(self) -> str:
        """The current schedule as a function to paste into a notebook."""
        return state_trace.schedule_function(self._state)

    def submission(self, step: int | None = None) -> str:
        """The schedule of the step (default: current) as the function courses ask students to hand
        in, ``def apply_trace(sch: s_tir.Schedule) -> None:`` with its import: it runs unchanged on
        ``tvm.s_tir.Schedule(prim_func)`` and reads back with ``Session.from_trace``."""
        state = self._state if step is None else self.state_at(step)
        return state_trace.submission(state)

    def submit(
        self,
        server: str | None = None,
        name: str = "",
        *,
        token: str | None = None,
        task: str | None = None,
        step: int | None = None,
        client_id: str | None = None,
        wait_s: float = 300.0,
        retry_s: float | None = None,
    ) -> dict:
        """Hand the step's (default: current) ``submission()`` in to a class server (``mlc-lab class
        serve``; default ``$MLC_LAB_CLASS_SERVER``) as the student whose ``token`` it is (default
        ``$MLC_LAB_CLASS_TOKEN``; ``name``: a pseudonym, for a demo server only); the verdict: score,
        per-task verdicts, latency and rank (``mlc_lab.classroom.client.submit``, which retries a
        broken connection without handing in twice)."""
        from mlc_lab.core.classroom import submit

        return submit(
            server,
            self.submission(step),
            task,
            token=token,
            name=name or None,
            client_id=client_id,
            wait_s=wait_s,
            retry_s=retry_s,
            file=f"step {self._history.current_id if step is None else step}",  # what its verdict calls it
        )

    def loop_tree(self, step: int | None = None) -> dict:
        state = self._state if step is None else self.state_at(step)
        return state.loop_tree()

    def step_view(self, step: int | None = None) -> StepView:
        """Everything a view shows of a step (default: the current one), computed once per step."""
        sid = self._history.current_id if step is None else step
        view = self._views.get(sid)
        if view is None:
            self._history.check(sid)
            view = self._views[sid] = self._build_view(sid)
        return view

    def _build_view(self, sid: int) -> StepView:
        step, state = self._history[sid], self._states[sid]
        script = state.script
        lines = changed_lines(self._states[step.parent].script, script) if step.parent is not None else []
        return StepView(
            id=step.id,
            parent=step.parent,
            kind=step.kind,
            primitive=step.primitive,
            label=step.label,
            script=script,
            loop_tree=state.loop_tree(),
            trace=state_trace.printed(state),
            changed_lines=tuple(lines),
            created=step.created,
            decisions=tuple(self._decisions_of(sid)),
        )

    # --- history ------------------------------------------------------------------------------
    @property
    def steps(self) -> list[Step]:
        return self._history.steps

    @property
    def current(self) -> Step:
        return self._history.current

    def path(self, step: int | None = None) -> list[int]:
        """Step ids from the root to ``step`` (default: the current one)."""
        return self._history.path(step)

    @property
    def visited_children(self) -> dict[int, int]:
        """Where redo goes from each step: parent id -> the child that was current last (the
        newest child when none was). The explorer's page applies the same rule to the steps it holds
        (js/explorer/history.ts, redoTarget; its Python twin is ``core/history.py``)."""
        return self._history.visited_children

    def undo(self) -> Step:
        self._history.undo()
        self._notify("undo")
        return self.current

    def redo(self) -> Step:
        self._history.redo()
        self._notify("redo")
        return self.current

    def goto(self, step: int) -> Step:
        self._history.goto(step)
        self._notify("goto")
        return self.current

    # --- applying primitives ------------------------------------------------------------------
    def apply(self, primitive: str, *args: Any, **kwargs: Any) -> Any:
        """Apply a schedule primitive with TVM's argument names; loops and blocks by their names.

        Returns the names of new loops/blocks (one name or a list), ``Sampled`` values for
        ``sample_*``, or None. On failure raises ``ScheduleStepError`` and changes nothing.
        """
        label = ""
        try:
            # bound once: the label and TVM's call read it
            call = _index_maps(schedule.bind_call(primitive, args, kwargs))
            label = call_label(primitive, call)
            handles = call.map(self._to_handles)
            known = self._known_step(call, label)
            if known is not None:
                return self._results_of(known)
            new_state, outputs = self._apply_call(handles, label)
        except MlcLabError as exc:
            exc.label = label or given_label(primitive, args, kwargs)  # the attempt reads as the step would
            self._say_way_back(exc)
            self._history.fail(exc, primitive)  # labelled by the error's field
            raise
        step = self._add_step(
            new_state,
            kind="apply",
            primitive=call.primitive,
            label=label,
            args=[jsonable(a) for a in args],
            kwargs={k: jsonable(v) for k, v in kwargs.items()},
            outputs=outputs,
        )
        return self._results(step, outputs)

    def _apply_call(self, handles: schedule.Call, label: str) -> tuple[schedule.State, list]:
        """The call applied to the current state. A split factor past its loop is refused to a person,
        unless a way this session found (``path_to``) has this very step on this very program: TVM
        confirmed that way, and the Hint's Apply must make it."""
        try:
            return self._state.apply_call(handles)
        except SplitPastLoopError:
            if (program.structural_hash(self._state.mod), label) not in self._way_splits:
                raise
            return self._state.apply_call(handles, past_loop=True)

    def allow_way_split(self, program_hash: str, label: str) -> None:
        """A split past its loop that a way this session found holds (``path_to``: TVM confirmed the
        way): ``apply`` makes that very step (``label``) on that very program (``program_hash``, its
        structural hash); a person's own split past its loop is still refused."""
        self._way_splits.add((program_hash, label))

    @property
    def failed(self) -> list[FailedAttempt]:
        """The attempts that failed (the last ``MAX_FAILED``), oldest first, each under the step it was
        tried from. A failure changes no step and notifies no listener; views read this list."""
        return self._history.failed

    def _say_way_back(self, exc: BaseException) -> None:
        """An unknown name at a step other than the original: the usual cause is clicks in the
        explorer that moved the session on from where the code expects it. Say where it is and the
        way back."""
        if isinstance(exc, NameResolutionError) and self._history.current_id != 0:
            exc.add_to_summary(
                f"The session is at step {self._history.current_id} ({self.current.label}), not at the original "
                f"program: Undo in the explorer, or session.goto(0), goes back to it"
            )

    # Applying one of these again, with the same arguments, to the step it made changes nothing.
    _IDEMPOTENT = frozenset({"parallel", "vectorize", "unroll", "bind", "annotate", "unannotate"})

    def _known_step(self, call: schedule.Call, label: str) -> Step | None:
        """The step ``call`` (labelled ``label``) would make, if one is there already: the current
        step itself (one intent, one step: parallel twice is parallel), or a child of it (the same step
        again after an undo: the session goes back down that branch)."""
        step = self.current
        same = step.kind == "apply" and step.primitive == call.primitive and step.label == label
        if same and call.primitive in self._IDEMPOTENT:
            return step
        if not step.children or call.primitive.startswith("sample_") or has_sampled(call.bound):
            return None  # the common case (a step at the tip of its branch); sampling again must draw again
        again = self._history.child_labelled(label)
        if again is not None:
            self._history.goto(again.id)
            self._notify("apply")
        return again

    def _results_of(self, step: Step) -> Any:
        return _as_returned(list(step.result or []), step.primitive)

    def _to_handles(self, value: Any) -> Any:
        if isinstance(value, Sampled):
            if value.session is not self:
                raise ScheduleStepError("that sampled value belongs to another session", primitive="?")
            if value.step not in self.path():
                raise ScheduleStepError(
                    "that sampled value was drawn on another branch of the history; sample again here",
                    primitive="?",
                )
            return value.handle
        if isinstance(value, list):
            return [self._to_handles(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._to_handles(v) for v in value)
        return value

    def _results(self, step: Step, outputs: list[schedule.Output]) -> Any:
        values: list[Any] = []
        for out in outputs:
            if out.kind in ("loop", "block"):
                values.append(out.name)
            else:
                values.append(Sampled(self, step.id, out.handle, out.value))
        return _as_returned(values, step.primitive)

    def _add_step(
        self,
        state: schedule.State,
        *,
        kind: str,
        primitive: str | None,
        label: str,
        args: list | None = None,
        kwargs: dict | None = None,
        outputs: list | None = None,
        parent: int | None = None,
        notify: bool = True,
    ) -> Step:
        step = self._history.add(
            kind,
            primitive,
            label,
            args=args,
            kwargs=kwargs,
            result=[o.name if o.kind != "value" else jsonable(o.value) for o in (outputs or [])] or None,
            created=tuple(o.name for o in (outputs or []) if o.kind in ("loop", "block") and o.name),
            parent=parent,
        )
        self._added.append(step.id)
        self._states[step.id] = state
        if notify:
            self._notify(kind)
        return step

    # --- replaying traces -----------------------------------------------------------------------
    def replay(self, trace: Any) -> Step:
        """Replay a whole trace (TVM's text or its JSON) from the original program, as a new branch.

        The trace is parsed, never executed. On any error nothing changes and ``TraceParseError``
        says which line.
        """
        built = state_trace.replay_source(self._states[0], trace, self._func_names)
        if not built:  # nothing but look-ups: the trace describes the original program
            self._history.goto(0)
            self._notify("replay")
            return self.current
        parent = 0
        for made in built:
            step = self._add_step(
                made.state,
                kind="replay",
                primitive=made.primitive,
                label=made.label,
                outputs=made.outputs,
                parent=parent,
                notify=False,
            )
            parent = step.id
        self._notify("replay")
        return self.current

    def run(self, fn: Callable[[Any], Any]) -> Step:
        """Run the user's own schedule function on a copy and record what it did as steps."""
        work, built = state_trace.run_function(self._state, fn, self._func_names)
        if not built:  # fall back to one step holding whatever the function did
            self._add_step(work, kind="run", primitive=None, label=f"run {getattr(fn, '__name__', 'fn')}()")
            return self.current
        for made in built:
            self._add_step(
                made.state, kind="apply", primitive=made.primitive, label=made.label, outputs=made.outputs, notify=False
            )
        self._notify("run")
        return self.current

    # --- sampled decisions ---------------------------------------------------------------------
    @property
    def decisions(self) -> list[Decision]:
        """One entry per sampling instruction of the current trace (computed once per step)."""
        return copy.deepcopy(list(self.step_view().decisions))

    def _decisions_of(self, sid: int) -> list[Decision]:
        out: list[Decision] = []
        for index, sample in enumerate(self._states[sid].sampled()):
            kind, decision, attrs = sample["kind"], sample["value"], sample["attrs"]
            entry: dict[str, Any] = {"index": index, "position": sample["position"], "kind": kind, "value": decision}
            if kind == "SamplePerfectTile":
                n, max_inner = int(attrs[0]), int(attrs[1])
                extent = product(decision)
                entry.update(
                    n=n,
                    max_innermost_factor=max_inner,
                    extent=extent,
                    choices=perfect_tilings(extent, n, max_inner),
                    loop=sample["loop"],
                )
            elif kind == "SampleCategorical":
                entry.update(
                    candidates=attrs[0], probs=attrs[1], choices=list(range(len(attrs[0]))), loop=None, extent=None
                )
            else:
                entry.update(choices=None, loop=None, extent=None)
            out.append(cast(Decision, entry))  # every key of a Decision is set above
        return out

    def set_decision(self, index: int, value: Any) -> Step:
        """Replay the schedule with sampling instruction ``index`` deciding ``value`` (a new step)."""
        decisions = self.decisions
        if not 0 <= index < len(decisions):
            raise DecisionError(f"there is no sampling instruction #{index}; the trace has {len(decisions)}")
        entry = decisions[index]
        clean = self._state.check_decision(entry["position"], value)
        if entry["kind"] == "SamplePerfectTile":
            if product(clean) != entry["extent"]:
                raise DecisionError(
                    f"the factors {clean} multiply to {product(clean)}, not to the loop extent {entry['extent']}"
                )
            limit = entry["max_innermost_factor"]
            if limit > 0 and clean[-1] > limit:
                raise DecisionError(f"the innermost factor {clean[-1]} is above max_innermost_factor={limit}")
        new_state = self._state.with_decision(entry["position"], clean)
        self._add_step(
            new_state,
            kind="decision",
            primitive=entry["kind"],
            label=f"decision #{index} = {clean}",
            args=[index, clean],
        )
        return self.current

    # --- analysis and measurement ---------------------------------------------------------------
    def footprint(
        self,
        loop: str,
        at: dict[str, int] | None = None,
        step: int | None = None,
        *,
        counts: bool = False,
        shape_vars: dict[str, int] | None = None,
        sweep_threads: bool = False,
        budget: Any = None,
    ) -> Any:
        """Which elements of every buffer the iterations of ``loop`` touch, with the enclosing loops
        fixed at ``at`` (names as in the script, ``Y/i`` included; missing ones are at their first
        value). ``shape_vars`` gives values to symbolic shapes; ``sweep_threads`` runs the enclosing
        ``threadIdx`` loops over every thread (``Footprint.thread`` then colours by thread); ``budget``
        (``access.Budget``) its memory, cancel and progress. Returns a
        ``mlc_lab.core.access.LoopFootprint`` (a dict of ``Footprint`` by buffer name)."""
        from mlc_lab.core import access

        return self._analyse(
            access.footprint,
            loop,
            at,
            step,
            counts=counts,
            shape_vars=shape_vars,
            sweep_threads=sweep_threads,
            budget=budget,
        )

    def gpu_stats(
        self,
        loop: str,
        at: dict[str, int] | None = None,
        warp: int | None = None,
        block: dict | None = None,
        step: int | None = None,
        *,
        shape_vars: dict[str, int] | None = None,
    ) -> Any:
        """Coalescing (sectors per request) and shared-memory bank conflicts for one warp."""
        from mlc_lab.core import access

        return self._analyse(access.gpu_stats, loop, at, step, warp=warp, block=block, shape_vars=shape_vars)

    def _analyse(self, analysis: Any, loop: str, at: dict | None, step: int | None, **options: Any) -> Any:
        """Run an access analysis (``access.footprint``, ``access.gpu_stats``) on ``loop`` of a step."""
        from mlc_lab.tvm import access as access_ir

        state = self._state if step is None else self.state_at(step)
        with analysis_errors(loop):
            try:
                program, loop_id, at_ids = access_ir.query(state, loop, at)
            except NameResolutionError as exc:
                if step is None:
                    self._say_way_back(exc)
                raise
            return analysis(program, loop_id, at_ids, **options)

    def measure(self, target: Any = "cpu", step: int | None = None, **kwargs: Any) -> Any:
        """Build the step (default: current), check it against the original program on random inputs,
        and time it in a worker process. The result is also kept in ``measurements``."""
        from mlc_lab.core.measure import measure

        sid = self._history.current_id if step is None else step
        module = self.state_at(sid).mod
        result = measure(module, self._original, self.func_name, target, **kwargs)
        self.measurements[sid] = result  # a step's view never changes: its measurements live here
        self._notify("measure", sid)
        return result

    def lower(self, step: int | None = None, target: Any = "cpu", **kwargs: Any) -> Any:
        """How the step (default: current) compiles for ``target``: "cpu", "cuda", a CUDA
        architecture ("sm_75"), a target dict ({"kind": "cuda", "arch": "sm_75"}) or a TVM target
        tag. Every pass ``tvm.compile`` runs with the TVMScript after it, the LLVM IR and assembly
        (CPU) or CUDA source and PTX (CUDA), and per-loop facts with a one-line verdict. Compiled in
        the worker process; cached per step and target. See ``mlc_lab.core.lowering.Lowering``."""
        from mlc_lab.core.lowering import lower, target_info

        sid = self._history.current_id if step is None else step
        state = self.state_at(sid)
        key = (sid, target if isinstance(target, str) and target in ("cpu", "cuda") else target_info(target)["key"])
        if key not in self._lowerings:
            self._lowerings[key] = lower(state.script, state.loop_tree(), self.func_name, target, step=sid, **kwargs)
        return self._lowerings[key]

    def check(self, names: list[str] | None = None, *, target: Any = None, step: int | None = None) -> Any:
        """Named checks of the step (default: current) and its hazards, as a ``CheckReport``: which
        optimisations the schedule applies (``mlc_lab.core.checks.CHECKS``), judged from what it does.
        ``target``: "cpu", "cuda", a CUDA arch ("sm_75") or a dict; default "cuda" when the program
        binds threads, else "cpu"."""
        from mlc_lab.core.checks import check_session

        if target is None:
            from mlc_lab.core.checks.facts import binds_threads

            target = "cuda" if binds_threads(self, step) else "cpu"
        return check_session(self, names, target=target, step=step)

    def path_to(self, target: Any, *, step: int | None = None) -> Any:
        """The way from a step (default: the current one) to ``target`` (an IRModule or PrimFunc,
        TVMScript text or a .py file, a trace of this program, another Session, or an assignment with
        a reference): a ``mlc_lab.model.path.PathAnswer``. ``reached`` only when TVM's
        ``structural_equal`` holds at the end of ``steps`` (each a primitive with TVM's argument names,
        loops and blocks named as in the script of the step it applies to, and why it is there);
        ``trace`` replays the whole schedule on TVM; ``undo_to`` is the step to go back to first when
        the target cannot be reached from this one; ``why`` says in one sentence why not."""
        from mlc_lab.core.path import path_to

        return path_to(self, target, step=step)

    def hint(self, target: Any, *, step: int | None = None) -> Any:
        """The next step towards ``target`` (as for ``path_to``) and one sentence that ties it to the
        target: a ``mlc_lab.model.path.Hint`` (``step.call()`` gives what ``apply`` takes)."""
        from mlc_lab.core.path import hint

        return hint(self, target, step=step)

    def cuda_source(self, step: int | None = None, **kwargs: Any) -> Any:
        """The CUDA kernel this step compiles to (no GPU needed); refuses unbound programs."""
        from mlc_lab.core.measure import cuda_source

        module = self._state.mod if step is None else self.state_at(step).mod
        return cuda_source(module, self.func_name, **kwargs)

    # --- change notification --------------------------------------------------------------------
    def on_change(self, callback: Listener) -> Callable[[], None]:
        """Call ``callback(change)`` (a :class:`Change`) after every change; returns a function that
        unsubscribes. The change carries the step it is about as a finished :class:`StepView`."""
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    def _notify(self, event: str, step: int | None = None) -> None:
        added, self._added = self._added, []
        if not self._listeners:  # nobody looks: build no views
            return
        change = Change(
            event,
            self.step_view(step),
            tuple(self._history[i].summary() for i in added),
        )
        for cb in list(self._listeners):
            try:
                cb(change)
            except Exception:  # a broken view must not break the session
                log.exception("mlc_lab: a session listener failed on %r", event)

    # --- helpers --------------------------------------------------------------------------------
    def state_at(self, step: int) -> schedule.State:
        """The schedule state of a step of this session (an unknown step is refused by name)."""
        return self._states[self._history.check(step)]

    def __repr__(self) -> str:
        return (
            f"<Session {self.func_name}: step {self._history.current_id} of {len(self._history)}: {self.current.label}>"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict | None:
        if display.has_view("explorer"):
            try:
                return self.view()._repr_mimebundle_(**kwargs)
            except Exception:  # noqa: BLE001  (no widgets front end: fall back to text)
                log.exception("mlc_lab: the explorer of this session could not be shown")
        return {"text/plain": repr(self) + "\n" + self.script}

    def view(self, **kwargs: Any) -> Any:
        """The interactive explorer of this session (registered by the widgets package); ``checks=``,
        ``tasks=`` or ``assignment=`` choose what its Checks panel lists (see ``mlc_lab.explore``)."""
        return display.open_view("explorer", self, **kwargs)

    def access_view(self, loop: str | None = None, **kwargs: Any) -> Any:
        """The memory-access view of this session (heatmaps of what ``loop`` touches)."""
        return display.open_view("access", self, loop, **kwargs)


def _index_maps(call: schedule.Call) -> schedule.Call:
    """Values given as plain data (a way's step, a form): an index map as lambda text ("lambda i, j:
    (j, i)", read by the trace's safe parser; the label keeps the text) and a buffer as a list
    (["write", 0], as JSON has it)."""
    plain = [
        (p, v)
        for p, _, v in call.bound
        if (p in ("index_map", "gen_new_ranges") and isinstance(v, str)) or (p == "buffer" and isinstance(v, list))
    ]
    if not plain:
        return call
    from mlc_lab.errors import TraceParseError
    from mlc_lab.tvm.state_trace import index_lambda

    def read(p: str, v: Any) -> Any:
        if p == "buffer" and isinstance(v, list):
            return tuple(v)
        if p not in ("index_map", "gen_new_ranges") or not isinstance(v, str):
            return v
        try:
            return index_lambda(v)
        except TraceParseError as exc:
            raise ScheduleStepError(f"the index map {v!r} cannot be read: {exc}", primitive=call.primitive) from None

    return schedule.Call(call.primitive, tuple((p, k, read(p, v)) for p, k, v in call.bound))


def _as_returned(values: list, primitive: str | None) -> Any:
    """What ``apply`` returns of a step's results: None, the one value, or the list (always a list
    for the primitives that return one, ``LIST_RESULTS``)."""
    if not values:
        return None
    return values[0] if len(values) == 1 and primitive not in LIST_RESULTS else values
