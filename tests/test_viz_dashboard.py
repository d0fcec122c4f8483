"""Details of the training dashboard a careful reader notices (issue 26, section 4).

- Stop is disabled (greyed out) unless a background run is going on.
- When every weight gradient is exactly 0 (ReLUs dead after lr = 10),
  the log-scale gradient panel cannot draw the norms: the panel and the status say so.
- The accuracy axis (0 to 1) and the loss axis share their tick positions: 6 ticks each,
  at the same heights, so one set of grid lines serves both.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ipywidgets")
from autodiff_lab.viz.dashboard import ZERO_GRADIENTS_NOTE, TrainingDashboard, nice_limit


def test_stop_is_disabled_unless_a_run_is_going_on():
    dash = TrainingDashboard(seed=0, grid=10, steps=2000, steps_per_frame=1)
    assert dash.stop_button.disabled  # idle: nothing to stop
    dash.start()
    assert not dash.stop_button.disabled and dash.running
    dash.stop()
    assert dash.stop_button.disabled and not dash.running


def test_dead_relus_are_said_in_words_in_the_panel_and_the_status():
    dash = TrainingDashboard(seed=0, grid=10, lr=10, steps_per_frame=100)
    dash.run(100)
    largest = np.array(dash.history["grad_norms"]).max(axis=1)
    assert largest[-1] == 0.0  # the premise: after lr = 10 no weight gets a gradient
    assert dash.gradients_vanished()
    assert dash._zero_note.get_text() == ZERO_GRADIENTS_NOTE
    assert "every weight gradient is 0" in dash.status.value


def test_a_learning_network_shows_no_zero_gradient_note():
    dash = TrainingDashboard(seed=0, grid=10, steps_per_frame=20)
    dash.run(20)
    assert not dash.gradients_vanished()
    assert dash._zero_note.get_text() == ""
    assert "every weight gradient is 0" not in dash.status.value


def test_accuracy_ticks_sit_at_the_loss_ticks_heights():
    dash = TrainingDashboard(seed=0, grid=10, steps_per_frame=20)
    dash.run(20)
    loss_ticks = dash._ax_curves.get_yticks()
    acc_ticks = dash._ax_acc.get_yticks()
    lo, hi = dash._ax_curves.get_ylim()
    assert dash._ax_acc.get_ylim() == (0.0, 1.0)
    assert len(loss_ticks) == len(acc_ticks) == 6
    np.testing.assert_allclose((loss_ticks - lo) / (hi - lo), acc_ticks, atol=1e-12)
    assert lo == 0 and hi >= max(dash.history["loss"])


@pytest.mark.parametrize(
    ("top", "limit"), [(0.8, 1.0), (1.0, 1.0), (1.2, 2.5), (3.3, 5.0), (7.0, 10.0), (0.013, 0.025)]
)
def test_nice_limit_is_five_round_intervals_at_or_above_top(top, limit):
    assert nice_limit(top) == pytest.approx(limit)
