"""The simulated phone and airline behave as ACEBench's scenario classes do."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolcall_repro.eval.acebench.agent.environment import Environment, UnknownScenarioError
from toolcall_repro.eval.acebench.agent.state import check_final_state, process_fraction
from toolcall_repro.eval.acebench.data import load_category
from toolcall_repro.toolcall import parse_tool_calls

PHONE = ["BaseApi", "MessageApi", "ReminderApi", "FoodPlatform"]


def run(env, name, **arguments):
    return env.execute({"name": name, "arguments": arguments})


def state_of(env, cls):
    return next(s[cls] for s in env.final_state() if cls in s)


def test_device_calls_reach_every_phone_class_and_state_is_json_shaped():
    env = Environment(PHONE, {"BaseApi": {"wifi": False, "logged_in": False}})
    assert run(env, "send_message", sender_name="Eve", receiver_name="Frank", message="hi")["status"] is False
    run(env, "turn_on_wifi")
    run(env, "login_device")
    assert all(inst.wifi and inst.logged_in for inst in env.instances.values())
    assert state_of(env, "BaseApi") == {"wifi": True, "logged_in": True}
    assert list(state_of(env, "MessageApi")["inbox"]) == ["1", "2", "3", "4", "5", "6"]  # JSON keys
    assert set(state_of(env, "FoodPlatform")) == {"users", "logged_in_users", "orders"}


def test_full_inbox_then_delete_then_send_and_the_missing_time_quirk():
    env = Environment(["BaseApi", "MessageApi"], {"BaseApi": {"wifi": True, "logged_in": True}})
    full = run(env, "send_message", sender_name="Grace", receiver_name="Frank", message="lunch?")
    assert full == {
        "status": False,
        "message": "Inbox capacity is full. You need to ask the user which message to delete.",
    }
    assert run(env, "get_earliest_message_id")["message_id"] == 3
    assert run(env, "get_latest_message_id")["message_id"] == 4
    assert run(env, "delete_message", message_id=3)["status"] is True
    assert (
        run(env, "send_message", sender_name="Grace", receiver_name="Frank", message="lunch?")["status"]
        is True
    )
    assert state_of(env, "MessageApi")["inbox"]["7"] == {
        "sender_id": "USR102",
        "receiver_id": "USR101",
        "message": "lunch?",
    }
    # Upstream stores sent messages without a time, so the latest-message lookup then fails.
    assert run(env, "get_latest_message_id").startswith("Error during execution: KeyError")


def test_food_orders_need_login_and_balance():
    env = Environment(["BaseApi", "FoodPlatform"], {"BaseApi": {"wifi": True, "logged_in": True}})
    order = {
        "username": "Jack",
        "merchant_name": "Jiutian BBQ",
        "items": [{"product": "Korean Grilled Beef", "quantity": 1}],
    }
    assert "not logged in" in run(env, "add_food_delivery_order", **order)["message"]
    assert (
        run(env, "login_food_platform", username="Jack", password="nope")["message"] == "Incorrect password"
    )
    assert run(env, "login_food_platform", username="Jack", password="password654")["status"] is True
    assert (
        run(env, "add_food_delivery_order", **order)["message"] == "Insufficient balance to place the order"
    )
    order["items"] = [{"product": "Grilled Pork Belly", "quantity": 1}]
    assert run(env, "add_food_delivery_order", **order)["status"] is True
    food = state_of(env, "FoodPlatform")
    assert food["users"]["Jack"]["balance"] == 42.0
    assert food["orders"] == [
        {
            "user_name": "Jack",
            "merchant_name": "Jiutian BBQ",
            "items": [{"product": "Grilled Pork Belly", "quantity": 1, "price_per_unit": 78.0}],
            "total_price": 78.0,
        }
    ]
    assert run(
        env, "add_food_delivery_order", username="Jack", merchant_name="Heytea", items=["tea"]
    ).startswith("Error")


def test_reminders_fill_up_at_six():
    env = Environment(["BaseApi", "ReminderApi"], {"BaseApi": {"wifi": True, "logged_in": True}})
    for i in range(3):
        assert (
            run(env, "add_reminder", title=f"t{i}", description="d", time="2024-06-11 16:00")["status"]
            is True
        )
    assert run(env, "add_reminder", title="t4", description="d", time="now")["status"] is False
    assert state_of(env, "ReminderApi")["reminder_list"]["6"]["reminder_id"] == 6


def test_airline_booking_fees_cancellation_and_cabin_change():
    env = Environment(["Travel"], {})
    booked = run(env, "reserve_flight", user_id="user1", password="password123", flight_no="CA1234",
                 cabin="Economy Class", payment_method="cash", baggage_count=2)  # fmt: skip
    assert (
        booked == "Booking successful. Reservation ID: res_5. Total cost: 1250 yuan (including baggage fees)."
    )
    travel = state_of(env, "Travel")
    assert travel["users"]["user1"]["cash_balance"] == 750.0
    assert travel["reservations"][-1] == {"reservation_id": "res_5", "user_id": "user1", "flight_no": "CA1234",
                                          "payment_method": "cash", "cabin": "Economy Class", "baggage": 2}  # fmt: skip
    # A wrong password still reaches the fee computation upstream and fails there.
    assert run(env, "reserve_flight", user_id="user1", password="x", flight_no="CA1234", cabin="Economy Class",
               payment_method="cash", baggage_count=0).startswith("Error during execution: KeyError")  # fmt: skip
    refund = run(env, "cancel_reservation", user_id="user1", reservation_id="res_5", reason="change of plans")
    assert (
        refund
        == "More than 24 hours before departure. Free cancellation successful, 1200 yuan has been refunded."
    )
    assert state_of(env, "Travel")["users"]["user1"]["cash_balance"] == 1950.0
    assert len(state_of(env, "Travel")["reservations"]) == 5  # cancelling keeps the reservation (upstream)
    change = run(env, "modify_flight", user_id="user1", reservation_id="res_1", new_cabin="Business Class")
    assert change == "Cabin change successful. Price difference paid: 1800."
    assert state_of(env, "Travel")["users"]["user1"]["bank_balance"] == 48200.0


def test_only_whitelisted_methods_are_reachable():
    env = Environment(PHONE + ["Travel"], {})
    for name in ("__init__", "load_scenario", "_extreme_message_id", "search_reminders", "__class__"):
        assert run(env, name).startswith("Error during execution: no function"), name
    assert run(env, "turn_on_wifi", power="max").startswith("Error during execution: TypeError")
    assert env.execute({"name": "turn_on_wifi", "arguments": ["x"]}).startswith("Error during execution")
    with pytest.raises(UnknownScenarioError):
        Environment(["Finance"], {})


def test_replaying_the_airline_milestones_reaches_the_ground_truth(data_dir):
    travel = [e for e in load_category(data_dir, "agent_multi_turn") if e["involved_classes"] == ["Travel"]]
    assert len(travel) == 10
    for entry in travel:
        env = Environment(entry["involved_classes"], entry["initial_config"])
        for milestone in entry["mile_stone"]:
            env.execute_all(parse_tool_calls(milestone, "python"))
        verdict = check_final_state(env.final_state(), entry["ground_truth"])
        assert verdict.valid, (entry["id"], verdict.error)
        assert not check_final_state(Environment(["Travel"], {}).final_state(), entry["ground_truth"]).valid


def test_process_fraction_is_in_order_and_takes_the_best_alternative():
    assert process_fraction(["a", "x", "b"], ["a", "b", "c"]) == pytest.approx(2 / 3)
    assert process_fraction(["b", "a"], ["a", "b"]) == 0.5
    assert process_fraction([" a "], ["a"]) == 1.0
    assert process_fraction([], []) == 1.0
    assert process_fraction(["c"], [["a", "b"], ["c"]]) == 1.0


@given(
    st.lists(st.sampled_from("abcd"), max_size=8),
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=5),
    st.lists(st.sampled_from("abcd"), max_size=3),
)
def test_process_fraction_is_a_fraction_and_never_drops_when_messages_are_added(process, milestones, more):
    value = process_fraction(process, milestones)
    assert 0.0 <= value <= 1.0
    assert value * len(milestones) == pytest.approx(round(value * len(milestones)))
    assert process_fraction(process + more, milestones) >= value
    assert process_fraction(milestones, milestones) == 1.0
