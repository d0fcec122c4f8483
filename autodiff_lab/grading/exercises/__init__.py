"""The course's exercises, one module per chapter: ``ch01.py`` … ``ch06.py``.

Each module defines ``EXERCISES: list[Exercise]`` (see :mod:`autodiff_lab.grading.spec`);
:mod:`autodiff_lab.grading.registry` collects them.
"""
