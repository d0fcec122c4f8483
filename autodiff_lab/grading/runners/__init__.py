"""What the student's process runs: one module per chapter of ``*_run(answer, inputs)``.

These modules hold only what calling a student's answer needs (the functions a case names,
the graph a case builds); no reference results and no mistake detectors. The worker
(:mod:`autodiff_lab.grading.worker`) imports them by name; the chapter modules in
:mod:`autodiff_lab.grading.exercises`, which hold the references, stay in the grader.

An own-code exercise's runner is loaded from its file in a child where nothing else of the
grader can be imported (:mod:`autodiff_lab.grading.own_code`): import what it needs at the
top of the module (siblings relatively, the library absolutely).
"""
