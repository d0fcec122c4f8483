"""The batch: each submission through read → plan → run isolated → judge → record.

:func:`grade_staged` takes one staged notebook through the stages, one module each
(:mod:`.reading`, :mod:`.planning`, :mod:`.isolation`, :mod:`.judging`, then
:mod:`.gradebook` records it). :func:`grade_batch` schedules many: who is graded first
and alone (:func:`_sort_staged`), the worker threads (:class:`_Scheduler`: start, finish,
record, Ctrl-C), and a notebook that timed out beside others graded again alone.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from . import registry
from .isolation import (
    InfrastructureFailure,
    paths_workers_must_not_see,
    paths_workers_need,
    run_isolated,
)
from .judging import judge, judge_all_crashed
from .planning import plan_submission
from .reading import read_facts, stage
from .results import (
    NOT_GRADED,
    Plan,
    Settings,
    Staged,
    Submission,
    SubmissionResult,
    capped_notes,
    now,
)
from .safetext import one_line
from .sandbox import NO_SANDBOX_NOTE
from .scoring import Status

RERUN_ALONE_NOTE = (
    "a part of this notebook timed out while other notebooks were graded beside it; it "
    "was graded again alone and this is that grade"
)


def plan_staged(staged: Staged, seed: int) -> Plan | SubmissionResult:
    """Read (in a limited child) and plan a staged notebook."""
    facts = read_facts(staged.notebook) if staged.notebook is not None else None
    return plan_submission(staged, facts, seed)


def grade_staged(
    staged: Staged,
    seed: int,
    settings: Settings,
    keep_hide: tuple[list[Path], list[Path]] | None = None,
    stop: threading.Event | None = None,
) -> SubmissionResult:
    """Read → plan → run isolated → judge one staged notebook (the caller records it)."""
    started = time.monotonic()
    plan = plan_staged(staged, seed)
    if isinstance(plan, SubmissionResult):
        plan.sandbox = settings.sandbox.kind
        return plan
    keep, hide = keep_hide or (
        paths_workers_need(plan.exercises),
        paths_workers_must_not_see(settings, [staged.submission]),
    )
    assert staged.folder is not None  # plan_submission returned a result for unreadable ones
    try:
        progress = run_isolated(plan, staged.folder, settings, keep, hide, stop)
    except InfrastructureFailure as exc:
        note = (
            f"not graded: {exc} — the grader's failure, not this notebook's; "
            "the next run grades it (nothing of it is recorded as a result)"
        )
        return SubmissionResult(
            staged.submission, [], staged.sha256, seed, now(), time.monotonic() - started,
            capped_notes([*plan.notes, note]), NOT_GRADED, sandbox=settings.sandbox.kind,
        )  # fmt: skip
    results = judge(plan, progress, settings.timeout)
    notes = capped_notes([*plan.notes, *progress.notes], progress.dropped_notes)
    if not settings.sandbox.isolated:
        notes.append(NO_SANDBOX_NOTE)
    return SubmissionResult(
        staged.submission, results, staged.sha256, seed, now(), time.monotonic() - started,
        notes, sandbox=settings.sandbox.kind,
    )  # fmt: skip


def grade_submission(
    submission: Submission, *, seed: int | None = None, settings: Settings | None = None
) -> SubmissionResult:
    """Grade one notebook on its own (stages it in a temporary folder first)."""
    settings = settings or Settings()
    with tempfile.TemporaryDirectory(prefix="autodiff-lab-grade-") as root:
        (staged,) = stage([submission], Path(root))
        seed = secrets.randbits(31) if seed is None else int(seed)
        return grade_staged(staged, seed, settings)


@dataclass
class BatchSummary:
    """What a batch did: graded now, skipped (already in the gradebook), grader errors."""

    submissions: list[Submission]
    graded: list[SubmissionResult]
    skipped: list[Submission]
    errors: list[tuple[Submission, str]]
    seed: int = 0
    interrupted: bool = False
    crashed_before: list[Submission] = field(default_factory=list)
    not_graded: list[Submission] = field(default_factory=list)  # the grader's failure
    warnings: list[str] = field(default_factory=list)


def grade_batch(
    submissions: list[Submission],
    gradebook,
    *,
    jobs: int = 1,
    regrade: bool = False,
    seed: int | None = None,
    settings: Settings | None = None,
    progress: bool | None = None,
    on_graded: Callable[[SubmissionResult], None] | None = None,
    new_seed: bool = False,
) -> BatchSummary:
    """Grade many notebooks, ``jobs`` at a time, recording each in ``gradebook`` as it ends.

    One secret seed (``secrets``) gives every student the same cases: drawn on the first run
    into a gradebook and stored there, reused by every rerun (a resumed batch, a late
    student), replaced only by ``seed`` or ``new_seed``. Each job is a thread supervising
    one worker process; every gradebook write happens in this thread. A submission left "in
    progress" by a grader that died while it ran alone is recorded as crashed; one that ran
    beside others is first tried again alone, so only the one that kills the grader is
    blamed. Ctrl-C stops the workers without waiting for their threads, keeps what is
    recorded, leaves the notebooks that were running marked "in progress" as graded beside
    others (the next run grades them first, alone, so a notebook that stalled the batch
    cannot stall it again), clears the other marks and raises ``KeyboardInterrupt``. A
    notebook that timed out while others ran beside it is graded again alone at the end (a
    neighbour may have taken its CPU), and that grade is kept.
    """
    settings = settings or Settings()
    registry.all_exercises()  # import every exercise module once, before any thread starts
    seed = gradebook.batch_seed(seed, new=new_seed)
    root = Path(tempfile.mkdtemp(prefix="autodiff-lab-grade-"))
    summary = BatchSummary(submissions, [], [], [], seed)
    try:
        first, rest = _sort_staged(stage(submissions, root), gradebook, regrade, summary, settings)
        if first or rest:
            # The staging folder is outside the sandbox's allowlist anyway; hidden too
            # should TMPDIR lie inside it.
            hide = [*paths_workers_must_not_see(settings, submissions), root]
            scheduler = _Scheduler(gradebook, summary, settings, hide, on_graded)
            scheduler.run(first, rest, jobs, progress)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return summary


def _sort_staged(
    staged: list[Staged], gradebook, regrade: bool, summary: BatchSummary, settings: Settings
) -> tuple[list[Staged], list[Staged]]:
    """(first, rest): what to grade first and alone, what after, ``jobs`` at a time.

    Skipped: what is graded already (same content; unless ``regrade``). First, alone: a
    notebook the previous run left "in progress" beside others (it may be the one that
    killed the grader). Recorded as crashed now: one it left in progress while grading it
    ALONE — that one did kill the grader.
    """
    left_running = gradebook.in_progress()
    first, rest = [], []
    for st in staged:
        key = st.submission.key
        if not regrade and gradebook.is_graded(key, st.sha256):
            summary.skipped.append(st.submission)
        elif not regrade and left_running.get(key, (None, 0))[0] == st.sha256:
            if not left_running[key][1]:
                first.append(st)
            elif _record(
                gradebook, summary, st, partial(_grader_died_on, st, summary.seed, settings)
            ):
                summary.crashed_before.append(st.submission)
        else:
            rest.append(st)
    return first, rest


class _Scheduler:
    """Worker threads for a batch; every gradebook write happens in the caller's thread."""

    def __init__(self, gradebook, summary: BatchSummary, settings: Settings, hide: list[Path],
                 on_graded: Callable[[SubmissionResult], None] | None) -> None:  # fmt: skip
        self.gradebook, self.summary, self.settings = gradebook, summary, settings
        self.keep_hide = (paths_workers_need(registry.all_exercises()), hide)
        self.on_graded = on_graded
        self.stop = threading.Event()
        self.running: dict[Future, tuple[Staged, int]] = {}
        self.again: list[Staged] = []  # timed out beside others: graded again alone
        self.interrupted = False

    def run(self, first: list[Staged], rest: list[Staged], jobs: int, bar: bool | None) -> None:
        """Three phases: ``first`` alone, ``rest`` ``jobs`` at a time, then ``again`` alone."""
        from tqdm import tqdm

        disable = None if bar is None else not bar
        self.bar = tqdm(total=len(first) + len(rest), desc="grading", unit="notebook",
                        disable=disable)  # fmt: skip
        self.pool = ThreadPoolExecutor(max_workers=max(1, int(jobs)))
        try:
            for phase, (items, width) in enumerate(((first, 1), (rest, jobs), (self.again, 1))):
                self._run_phase(list(items), max(1, int(width)), phase)
        except KeyboardInterrupt:
            self._interrupted([*first, *rest])
            raise
        finally:
            self.stop.set()
            self.pool.shutdown(wait=not self.interrupted, cancel_futures=True)
            self.bar.close()

    def _run_phase(self, queue: list[Staged], width: int, phase: int) -> None:
        while queue or self.running:
            while queue and len(self.running) < width:
                self._start(queue.pop(0), width)
            finished, _ = wait(self.running, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                self._finish(future, phase)

    def _start(self, st: Staged, width: int) -> None:
        self.gradebook.mark_in_progress(st.submission.key, st.sha256, alone=width == 1)
        args = (st, self.summary.seed, self.settings, self.keep_hide, self.stop)
        self.running[self.pool.submit(grade_staged, *args)] = (st, width)

    def _finish(self, future: Future, phase: int) -> None:
        """Record one finished notebook (or keep it for the alone phase)."""
        st, ran_with = self.running.pop(future)
        try:
            result = future.result()
        except Exception as exc:  # a grader bug or a broken exercise: report it
            _grader_error(self.gradebook, self.summary, st, exc)
            self.bar.update(1)
            return
        if ran_with > 1 and _timed_out(result) and phase < 2:
            self.again.append(st)  # kept in progress: graded again alone
            return
        if phase == 2:
            result.notes.append(RERUN_ALONE_NOTE)
        self.bar.update(1)
        if not _record(self.gradebook, self.summary, st, result):
            return
        if str(result.status) == NOT_GRADED:
            self.summary.not_graded.append(result.submission)
        else:
            self.summary.graded.append(result)
        if self.on_graded is not None:
            self.on_graded(result)

    def _interrupted(self, staged: list[Staged]) -> None:
        """Ctrl-C: the notebooks running stay marked (next run: first, alone — never
        blamed for a Ctrl-C); the other marks are cleared."""
        self.stop.set()
        self.interrupted = self.summary.interrupted = True
        stalled = {id(st) for st, _ in self.running.values()}
        for st in staged:
            if self.gradebook.is_graded(st.submission.key, st.sha256):
                continue
            if id(st) in stalled:
                self.gradebook.mark_in_progress(st.submission.key, st.sha256, alone=False)
            else:
                self.gradebook.clear_in_progress(st.submission.key)


def _record(
    gradebook,
    summary: BatchSummary,
    st: Staged,
    result: SubmissionResult | Callable[[], SubmissionResult],
) -> bool:
    """Record one submission's result (made here when given how to make it); a failure
    doing so is that submission's grader error (listed, never recorded, so the next run
    grades it), not the batch's."""
    try:
        gradebook.record(result() if callable(result) else result)
        return True
    except Exception as exc:
        _grader_error(gradebook, summary, st, exc)
        return False


def _grader_error(gradebook, summary: BatchSummary, st: Staged, exc: Exception) -> None:
    summary.errors.append((st.submission, one_line(f"{type(exc).__name__}: {exc}", 300)))
    try:
        gradebook.clear_in_progress(st.submission.key)
    except Exception:  # the gradebook itself failing: the error above says enough
        pass


def _timed_out(result: SubmissionResult) -> bool:
    return any(str(e.status) == str(Status.TIMED_OUT) for e in result.exercises) or any(
        "did not finish within" in n for n in result.notes
    )


def _grader_died_on(staged: Staged, seed: int, settings: Settings) -> SubmissionResult:
    """The record of a notebook the grader itself died on while grading it alone."""
    note = (
        "the grader itself was killed while grading this notebook alone; it was not run "
        "again (grade it with --regrade to try once more)"
    )
    plan = plan_staged(staged, seed)
    if isinstance(plan, SubmissionResult):
        return plan
    return SubmissionResult(
        staged.submission, judge_all_crashed(plan, note), staged.sha256, seed, now(), 0.0,
        [note], sandbox=settings.sandbox.kind,
    )  # fmt: skip
