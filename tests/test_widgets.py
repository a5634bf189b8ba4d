"""The notebook widgets, driven programmatically against a real emulator and fleet."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from conftest import FakeClock
from eventhub_clients import Receiver, send, wait_for

from streamlab.fleet import KILLED, PAUSED, RUNNING
from streamlab.widgets import COLOURS, ProducerPanel, StatusBoard


@pytest.fixture
def panel(fleet):
    made = ProducerPanel(fleet, refresh_interval=0.05)
    yield made
    made.close()


def _one_round(fleet):
    start = fleet.rounds
    wait_for(lambda: fleet.rounds >= start + 2, what="two rounds of the fleet")


def _body(event) -> bytes:
    return event.body if isinstance(event.body, bytes) else b"".join(event.body)


# -- ProducerPanel ---------------------------------------------------------------------------


def test_add_pause_resume_and_kill_from_the_panel(panel, fleet, clock):
    panel.add_button.click()
    wait_for(lambda: fleet.events_sent == 1, what="Producer 1's first heartbeat")
    row = panel.rows["Producer 1"]
    wait_for(lambda: row.sent.value == "1 sent", what="the row's count")
    wait_for(lambda: "<b>1</b>" in panel.counter.value, what="the panel's counter")

    row.pause.value = True
    assert fleet.machine("Producer 1").state == PAUSED and row.pause.description == "Resume"
    clock.now += 5.0
    _one_round(fleet)
    assert fleet.events_sent == 1  # paused: the clock moved, nothing was sent

    row.pause.value = False
    assert fleet.machine("Producer 1").state == RUNNING
    wait_for(lambda: fleet.events_sent == 2, what="the heartbeat after resuming")
    wait_for(lambda: "<b>2</b>" in panel.counter.value, what="the counter follows the fleet")

    row.kill.click()
    assert fleet.machine("Producer 1").state == KILLED
    assert row.pause.disabled and row.kill.disabled and "killed" in row.sent.value
    clock.now += 5.0
    _one_round(fleet)
    assert fleet.events_sent == 2


def test_a_pause_made_in_code_shows_on_the_toggle(panel, fleet):
    panel.add_button.click()
    panel.add_button.click()
    assert list(panel.rows) == ["Producer 1", "Producer 2"]
    fleet.pause("Producer 2")
    wait_for(lambda: panel.rows["Producer 2"].pause.value, what="the toggle to show the pause")
    assert fleet.machine("Producer 2").state == PAUSED  # showing it did not toggle it back


def test_the_rate_slider_applies_to_every_producer_and_new_ones(panel, fleet, clock):
    panel.add_button.click()
    wait_for(lambda: fleet.events_sent == 1, what="first heartbeat")
    panel.rate.value = 4.0
    panel.add_button.click()
    assert [m.rate for m in fleet.machines] == [4.0, 4.0]
    wait_for(lambda: fleet.events_sent == 2, what="Producer 2's first heartbeat")
    for expected in (4, 6, 8):
        clock.now += 0.25
        wait_for(lambda n=expected: fleet.events_sent == n, what=f"{expected} heartbeats")


def test_bad_and_late_events_come_from_the_chosen_or_first_running_producer(panel, fleet, hub):
    panel.late_button.click()
    assert "add one first" in panel.message.value
    panel.add_button.click()
    panel.add_button.click()
    wait_for(lambda: fleet.events_sent == 2, what="first heartbeats")
    fleet.pause("Producer 1")
    with Receiver(hub.connection_string, starting_position="-1") as receiver:
        panel.bad_kind.value = "empty"
        panel.bad_button.click()  # from the first running producer: Producer 2
        assert "Producer 2 sent a bad event (empty)" in panel.message.value
        panel.sender.value = "Producer 1"  # paused, but chosen: it may still misbehave
        panel.late_button.click()
        wait_for(lambda: fleet.events_sent == 4, what="the injected events")
        events = receiver.wait_count(4)

    def key(event):
        return (
            event.partition_key.decode()
            if isinstance(event.partition_key, bytes)
            else event.partition_key
        )

    # Events come back partition by partition: tell them apart by content, not position.
    assert [key(e) for e in events if _body(e) == b""] == ["Producer 2"]
    times = sorted(json.loads(_body(e))["machine_time"] for e in events if key(e) == "Producer 1")
    assert len(times) == 2 and times[0] < times[1]  # the late one is a minute older


def test_the_panel_displays_as_a_widget_and_closes(fleet):
    panel = ProducerPanel(fleet)
    bundle = panel._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.widget.model_id
    panel.close()
    fleet.add()  # a closed panel ignores the fleet instead of failing on closed widgets
    assert not fleet.errors


# -- StatusBoard -----------------------------------------------------------------------------

T0 = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)


def _row(name, status, previous, seconds):
    return {
        "machine_name": name,
        "status": status,
        "previous_status": previous,
        "last_status_change_time": T0 + timedelta(seconds=seconds),
    }


def test_each_transition_sets_the_badge_colour_and_the_log():
    from pyspark.sql import Row

    clock = FakeClock(T0.timestamp() + 0.5)
    board = StatusBoard(clock=clock, log_size=3)
    story = [
        (None, "Initializing", None, 0),
        ("Initializing", "Healthy", None, 1),
        ("Healthy", "Unhealthy", None, 6),
        ("Unhealthy", "Healthy", None, 9),
    ]
    for step, (previous, status, _, seconds) in enumerate(story):
        clock.now = T0.timestamp() + seconds + 0.25 * (step + 1)
        row = _row("m1", status, previous, seconds)
        board.update([Row(**row) if step % 2 else row])  # dicts and Spark Rows alike
        assert board.statuses == {"m1": status}
        badge = board.badge("m1")
        assert COLOURS[status] in badge.value and "m1" in badge.value
        assert f"streamlab-{status.lower()}" in badge._dom_classes
    assert "since 12:00:09.000 UTC" in board.badge("m1").value
    # Newest first, at most log_size.
    assert [t.status for t in board.transitions] == ["Healthy", "Unhealthy", "Healthy"]
    assert board.log.value.count("&rarr;") == 3
    assert "last <b>1.00 s</b>" in board.latency.value and "of 4" in board.latency.value


def test_a_late_row_is_logged_but_does_not_move_a_badge_back():
    board = StatusBoard()
    board.update(
        [
            _row("m1", "Initializing", None, 0),
            _row("m1", "Healthy", "Initializing", 1),
            _row("m2", "Initializing", None, 1),
        ]
    )
    board.update([_row("m1", "Unhealthy", "Healthy", 0.5)])
    assert board.statuses == {"m1": "Healthy", "m2": "Initializing"}
    assert len(board.transitions) == 4
    assert [b.value.split("<b>")[1].split("</b>")[0] for b in board.badges.children] == ["m1", "m2"]


def test_wait_for_returns_once_the_board_shows_it_and_says_so(capsys):
    board = StatusBoard()
    board.update([_row("m1", "Initializing", None, 0)])
    later = threading.Timer(0.2, board.update, args=([_row("m1", "Healthy", "Initializing", 1)],))
    later.start()
    board.wait_for("m1 Healthy", lambda s: s.get("m1") == "Healthy", timeout=30)
    assert capsys.readouterr().out.startswith("m1 Healthy after ")


def test_wait_for_gives_up_with_what_the_board_shows():
    board = StatusBoard()
    board.update(
        [
            _row("Producer 10", "Healthy", "Initializing", 0),
            _row("Producer 2", "Unhealthy", "Healthy", 0),
        ]
    )
    with pytest.raises(
        TimeoutError,
        match=r"waited 0 s for all red; the board shows "
        r"Producer 2: Unhealthy, Producer 10: Healthy\. Check",
    ):
        board.wait_for("all red", lambda s: False, timeout=0.2, hint="Check the producers.")


def test_wait_for_stops_at_once_when_the_query_feeding_the_board_stopped(spark, tmp_path):
    query = (
        spark.readStream.format("rate")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    query.stop()
    with pytest.raises(RuntimeError, match="the query feeding the board stopped"):
        StatusBoard().wait_for("anything", lambda s: False, timeout=60, query=query)


def test_machines_the_fleet_knows_show_grey_until_a_transition(fleet):
    fleet.add()
    board = StatusBoard(fleet=fleet)
    assert board.statuses == {"Producer 1": None}
    assert COLOURS[None] in board.badge("Producer 1").value
    fleet.add()
    wait_for(lambda: "Producer 2" in board.statuses, what="the new machine's grey badge")
    board.update([_row("Producer 2", "Initializing", None, 0)])
    assert board.statuses == {"Producer 1": None, "Producer 2": "Initializing"}
    board.stop()


def test_follow_eventhub_shows_transitions_sent_to_the_status_hub(hub):
    cs = hub.connection_string
    send(cs, [json.dumps(_row("m1", "Initializing", None, 0), default=str)], eventhub="status")
    board = StatusBoard()
    board.follow_eventhub(cs)
    try:
        wait_for(lambda: board.statuses.get("m1") == "Initializing", what="the replayed transition")
        assert "no transition yet" in board.latency.value  # history is not latency
        now = datetime.now(UTC).isoformat()
        send(
            cs,
            [
                "not json",
                json.dumps(
                    {
                        "machine_name": "m1",
                        "status": "Healthy",
                        "previous_status": "Initializing",
                        "last_status_change_time": now,
                    }
                ),
            ],
            eventhub="status",
        )
        wait_for(lambda: board.statuses.get("m1") == "Healthy", what="the live transition")
        assert "1 unreadable event(s) ignored" in board.info.value
        assert "Latency: last" in board.latency.value
    finally:
        board.stop()
    assert "stopped" in board.info.value


SCHEMA = (
    "machine_name STRING, status STRING, previous_status STRING, last_status_change_time TIMESTAMP"
)


def test_follow_table_waits_for_the_table_then_applies_only_new_rows(spark):
    board = StatusBoard()
    board.follow_table(spark, "widget_test_status", interval=0.05)
    try:
        wait_for(lambda: "waiting for table" in board.info.value, what="the waiting message")
        first = [_row("m1", "Initializing", None, 0), _row("m2", "Initializing", None, 0)]
        spark.createDataFrame(first, SCHEMA).createOrReplaceTempView("widget_test_status")
        wait_for(lambda: len(board.statuses) == 2, what="the first rows")
        spark.createDataFrame(
            first + [_row("m1", "Healthy", "Initializing", 1)], SCHEMA
        ).createOrReplaceTempView("widget_test_status")
        wait_for(lambda: board.statuses["m1"] == "Healthy", what="the new row")
        assert len(board.transitions) == 3  # the first two were not applied again
    finally:
        board.stop()
        spark.catalog.dropTempView("widget_test_status")


def test_a_paused_row_looks_paused_and_the_status_line_follows_the_last_action(panel, fleet):
    for _ in range(3):
        panel.add_button.click()
    assert "Producer 3 started." in panel.message.value
    row = panel.rows["Producer 2"]
    row.pause.value = True
    assert "streamlab-producer-paused" in row.box._dom_classes and "paused" in row.state.value
    assert "Producer 2 paused." in panel.message.value
    assert "started" not in panel.message.value
    panel.rows["Producer 3"].kill.click()
    assert "Producer 3 killed." in panel.message.value
    fleet.pause("Producer 1")  # in code: the panel says so too
    wait_for(lambda: "Producer 1 paused." in panel.message.value, what="the pause in the line")
    row.pause.value = False
    assert "streamlab-producer-paused" not in row.box._dom_classes and "running" in row.state.value
    assert "Producer 2 resumed." in panel.message.value


def test_after_the_fleet_stopped_the_panel_offers_no_live_controls(panel, fleet):
    panel.add_button.click()
    panel.add_button.click()
    fleet.pause("Producer 2")
    fleet.stop()
    wait_for(lambda: "stopped" in panel.message.value, what="the panel to show the stop")
    for row in panel.rows.values():
        assert row.pause.disabled and row.kill.disabled, row.name
        assert "stopped" in row.state.value
    assert panel.add_button.disabled and panel.bad_button.disabled and panel.late_button.disabled
