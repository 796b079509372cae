"""The simulated phone of ACEBench's agent categories: device, messages, reminders, food delivery.

Behaviour (initial data, preconditions, messages, state changes and their quirks) follows upstream
`model_inference/multi_*/scenariosen/phone_platform/*.py` at the pinned commit, because the ground-truth
final states were produced by those classes. Every class is its own instance with its own `wifi` and
`logged_in` flags; a device call reaches every instance that has it (see environment.py).
"""

from __future__ import annotations

import copy
from datetime import datetime

PEOPLE = {
    "Eve": ("USR100", "123-456-7890", "Software Engineer"),
    "Frank": ("USR101", "234-567-8901", "Data Scientist"),
    "Grace": ("USR102", "345-678-9012", "Product Manager"),
    "Helen": ("USR103", "456-789-0123", "UX Designer"),
    "Isaac": ("USR104", "567-890-1234", "DevOps Engineer"),
    "Jack": ("USR105", "678-901-2345", "Marketing Specialist"),
}
INBOX = {
    1: (
        "USR100",
        "USR101",
        "Hey Frank, don't forget about our meeting on 2024-06-11 at 4 PM in Conference Room 1.",
        "2024-06-09",
    ),
    2: (
        "USR101",
        "USR102",
        'Can you help me order a "Margherita Pizza" delivery? The merchant is Domino\'s.',
        "2024-03-09",
    ),
    3: (
        "USR102",
        "USR103",
        'Please check the milk tea delivery options available from Heytea and purchase a cheaper milk tea for me. After making the purchase, remember to reply to me with "Already bought."',
        "2023-12-05",
    ),
    4: ("USR103", "USR102", "No problem Helen, I can assist you.", "2024-09-09"),
    5: ("USR104", "USR105", "Isaac, are you available for a call?", "2024-06-06"),
    6: ("USR105", "USR104", "Yes Jack, let's do it in 30 minutes.", "2024-01-15"),
}
REMINDERS = {
    1: (1001, "Doctor's Appointment", "Visit Dr. Smith for a checkup.", "2024-07-15 09:30"),
    2: (1002, "Team Meeting", "Monthly project review with the team.", "2024-07-17 11:00"),
    3: (
        1003,
        "To-do list",
        'First, help Frank place a food delivery order at "Hema Fresh," ordering two "Fresh Gift Packs." Then, send a message to Frank saying, "The price of the purchased goods is () yuan." Replace the parentheses with the actual amount, keeping one decimal place.',
        "2024-07-16 11:00",
    ),
}
FOOD_USERS = {
    "Eve": ("U100", "password123", 500.0),
    "Frank": ("U101", "password456", 300.0),
    "Grace": ("U102", "password789", 150.0),
    "Helen": ("U103", "password321", 800.0),
    "Isaac": ("U104", "password654", 400.0),
    "Jack": ("U105", "password654", 120.0),
}
MERCHANTS = {
    "Domino's": ("M100", "Pizza", {"Margherita Pizza": 68.0, "Super Supreme Pizza": 88.0}),
    "Rice Village Bibimbap": ("M101", "Bibimbap", {"Stone Pot Bibimbap": 35.0, "Korean Beef Bibimbap": 45.0}),
    "Haidilao": ("M102", "Hotpot", {"Beef Rolls": 68.0, "Seafood Platter": 88.0}),
    "Heytea": ("M103", "Milk Tea", {"Cheese Milk Tea": 25.0, "Four Seasons Spring Milk Tea": 22.0}),
    "Hema Fresh": ("M104", "Fresh Grocery", {"Organic Vegetable Pack": 15.0, "Fresh Gift Pack": 99.0}),
    "Jiutian BBQ": ("M105", "BBQ", {"Korean Grilled Beef": 128.0, "Grilled Pork Belly": 78.0}),
}
CAPACITY = 6


def _result(ok: bool, message: str, **extra) -> dict:
    return {"status": ok, "message": message, **extra}


class BaseApi:
    """Device state: Wi-Fi and device login."""

    API = ("turn_on_wifi", "login_device")
    SAVED = ("wifi", "logged_in")

    def __init__(self) -> None:
        self.wifi = False
        self.logged_in = True

    def load_scenario(self, scenario: dict) -> None:
        self.wifi = scenario.get("wifi", False)
        self.logged_in = scenario.get("logged_in", True)

    def turn_on_wifi(self) -> dict:
        self.wifi = True
        return _result(True, "Wi-Fi has been turned on")

    def login_device(self) -> dict:
        self.logged_in = True
        return _result(True, "Device has been logged in")


class MessageApi(BaseApi):
    API = BaseApi.API + (
        "send_message",
        "delete_message",
        "view_messages_between_users",
        "search_messages",
        "get_all_message_times_with_ids",
        "get_latest_message_id",
        "get_earliest_message_id",
    )
    SAVED = ("inbox",)

    def __init__(self) -> None:
        super().__init__()
        self.user_list = {
            name: {"user_id": uid, "phone_number": phone, "occupation": job}
            for name, (uid, phone, job) in PEOPLE.items()
        }
        self.inbox = {
            mid: {"sender_id": s, "receiver_id": r, "message": text, "time": t}
            for mid, (s, r, text, t) in INBOX.items()
        }
        self.message_id_counter = len(INBOX)

    def send_message(self, sender_name: str, receiver_name: str, message: str) -> dict:
        if not self.logged_in:
            return _result(False, "Device not logged in, unable to send message")
        if not self.wifi:
            return _result(False, "Wi-Fi is turned off, cannot send messages at this time")
        if len(self.inbox) >= CAPACITY:
            return _result(False, "Inbox capacity is full. You need to ask the user which message to delete.")
        if sender_name not in self.user_list or receiver_name not in self.user_list:
            return _result(False, "Sender or receiver does not exist")
        self.message_id_counter += 1
        # New messages carry no "time" (upstream), which later breaks the latest/earliest lookups.
        self.inbox[self.message_id_counter] = {
            "sender_id": self.user_list[sender_name]["user_id"],
            "receiver_id": self.user_list[receiver_name]["user_id"],
            "message": message,
        }
        return _result(True, f"Message successfully sent to {receiver_name}.")

    def delete_message(self, message_id: int) -> dict:
        if not self.logged_in:
            return _result(False, "Device not logged in, unable to delete message")
        if message_id not in self.inbox:
            return _result(False, "Message ID does not exist")
        del self.inbox[message_id]
        return _result(True, f"Message ID {message_id} has been successfully deleted.")

    def view_messages_between_users(self, sender_name: str, receiver_name: str) -> dict:
        if not self.logged_in:
            return _result(False, "Device not logged in, unable to view message information")
        if sender_name not in self.user_list:
            return _result(False, "Sender does not exist")
        if receiver_name not in self.user_list:
            return _result(False, "Receiver does not exist")
        sender_id = self.user_list[sender_name]["user_id"]
        receiver_id = self.user_list[receiver_name]["user_id"]
        found = [
            {"id": mid, "sender": sender_name, "receiver": receiver_name, "message": m["message"]}
            for mid, m in self.inbox.items()
            if m["sender_id"] == sender_id and m["receiver_id"] == receiver_id
        ]
        if not found:
            return _result(False, "No related message records found")
        return {"status": True, "messages": found}

    def search_messages(self, user_name: str, keyword: str) -> dict:
        if user_name not in self.user_list:
            return _result(False, "User does not exist")
        uid = self.user_list[user_name]["user_id"]
        found = [
            {"id": mid, "sender_id": m["sender_id"], "receiver_id": m["receiver_id"], "message": m["message"]}
            for mid, m in self.inbox.items()
            if uid in (m["sender_id"], m["receiver_id"]) and keyword.lower() in m["message"].lower()
        ]
        if not found:
            return _result(False, "No messages found containing the keyword")
        return {"status": True, "messages": found}

    def get_all_message_times_with_ids(self) -> dict:
        if not self.logged_in:
            return _result(
                False,
                "Device not logged in, unable to retrieve all message times and their corresponding message IDs.",
            )
        return {mid: m["time"] for mid, m in self.inbox.items()}

    def _extreme_message_id(self, which: str) -> dict:
        if not self.logged_in:
            return _result(False, f"Device not logged in, unable to retrieve the {which} sent message ID.")
        if not self.inbox:
            return _result(False, "No message records found")
        pick = max if which == "latest" else min
        # First message wins ties, as upstream's strict comparison does; a missing time raises KeyError.
        times = [(datetime.strptime(m["time"], "%Y-%m-%d"), mid) for mid, m in self.inbox.items()]
        best = pick(times, key=lambda t: t[0])[1]
        return _result(True, f"The {which} message ID is {best}", message_id=best)

    def get_latest_message_id(self) -> dict:
        return self._extreme_message_id("latest")

    def get_earliest_message_id(self) -> dict:
        return self._extreme_message_id("earliest")


class ReminderApi(BaseApi):
    API = BaseApi.API + ("view_reminder_by_title", "add_reminder", "delete_reminder", "view_all_reminders")
    SAVED = ("reminder_list",)

    def __init__(self) -> None:
        super().__init__()
        self.reminder_list = {
            key: {"reminder_id": rid, "title": title, "description": text, "time": t, "notified": False}
            for key, (rid, title, text, t) in REMINDERS.items()
        }
        self.reminder_id_counter = len(REMINDERS)

    def view_reminder_by_title(self, title: str) -> dict:
        if not self.logged_in:
            return _result(False, "The device is not logged in, so you cannot view notifications")
        for reminder in self.reminder_list.values():
            if reminder["title"] == title:
                return {"status": True, "reminder": reminder}
        return _result(False, f"No reminder found with the title '{title}'.")

    def add_reminder(self, title: str, description: str, time: str) -> dict:
        if not self.logged_in:
            return _result(False, "Device not logged in. Unable to add a new reminder.")
        if len(self.reminder_list) >= CAPACITY:
            return _result(False, "Reminder capacity is full. Unable to add a new reminder.")
        self.reminder_id_counter += 1
        rid = self.reminder_id_counter
        self.reminder_list[rid] = {
            "reminder_id": rid,
            "title": title,
            "description": description,
            "time": time,
            "notified": False,
        }
        return _result(True, f"Reminder '{title}' was successfully added.")

    def delete_reminder(self, reminder_id: int) -> dict:
        if not self.logged_in:
            return _result(False, "Device not logged in. Unable to delete the specified reminder.")
        if reminder_id not in self.reminder_list:
            return _result(False, "Reminder ID does not exist.")
        del self.reminder_list[reminder_id]
        return _result(True, f"Reminder ID {reminder_id} was successfully deleted.")

    def view_all_reminders(self) -> dict:
        if not self.reminder_list:
            return _result(False, "No reminders found.")
        keep = ("title", "description", "time", "notified")
        return {"status": True, "reminders": [{k: r[k] for k in keep} for r in self.reminder_list.values()]}


class FoodPlatform(BaseApi):
    API = BaseApi.API + (
        "login_food_platform",
        "view_logged_in_users",
        "check_balance",
        "add_food_delivery_order",
        "get_products",
        "view_orders",
        "search_orders",
    )
    SAVED = ("users", "logged_in_users", "orders")

    def __init__(self) -> None:
        super().__init__()
        self.users = {
            name: {"user_id": uid, "password": pw, "balance": bal}
            for name, (uid, pw, bal) in FOOD_USERS.items()
        }
        self.merchant_list = {
            name: {
                "merchant_id": mid,
                "service_type": kind,
                "menu": [{"product": p, "price": price} for p, price in menu.items()],
            }
            for name, (mid, kind, menu) in copy.deepcopy(MERCHANTS).items()
        }
        self.logged_in_users: list[str] = []
        self.orders: list[dict] = []

    def load_scenario(self, scenario: dict) -> None:
        super().load_scenario(scenario)
        self.logged_in_users = list(scenario.get("logged_in_users", []))

    def login_food_platform(self, username: str, password: str) -> dict:
        if not self.wifi:
            return _result(False, "Wi-Fi is not enabled, unable to login")
        if username not in self.users:
            return _result(False, "User does not exist")
        if self.users[username]["password"] != password:
            return _result(False, "Incorrect password")
        if username in self.logged_in_users:
            return _result(False, f"{username} is already logged in")
        self.logged_in_users.append(username)
        return _result(True, f"User {username} has successfully logged in!")

    def view_logged_in_users(self) -> dict:
        if not self.logged_in_users:
            return _result(False, "No users are currently logged in to the food platform")
        return {"status": True, "logged_in_users": self.logged_in_users}

    def check_balance(self, user_name: str) -> float:
        return self.users[user_name]["balance"] if user_name in self.users else 0.0

    def add_food_delivery_order(self, username: str, merchant_name: str, items: list) -> dict:
        if username not in self.logged_in_users:
            return _result(False, f"User {username} is not logged in to the food platform")
        if merchant_name not in self.merchant_list:
            return _result(False, "Merchant does not exist")
        total, lines = 0.0, []
        prices = {p["product"]: p["price"] for p in self.merchant_list[merchant_name]["menu"]}
        for item in items:
            product, quantity = item.get("product"), item.get("quantity", 1)
            if not isinstance(quantity, int) or quantity <= 0:
                return _result(False, f"Invalid quantity {quantity} for product {product}")
            if product not in prices:
                return _result(False, f"Product {product} does not exist in {merchant_name}'s menu")
            total += prices[product] * quantity
            lines.append({"product": product, "quantity": quantity, "price_per_unit": prices[product]})
        if total > self.users[username]["balance"]:
            return _result(False, "Insufficient balance to place the order")
        self.users[username]["balance"] -= total
        self.orders.append(
            {"user_name": username, "merchant_name": merchant_name, "items": lines, "total_price": total}
        )
        return _result(
            True, f"Food delivery order successfully placed with {merchant_name}. Total amount: {total} yuan"
        )

    def get_products(self, merchant_name: str) -> list | dict:
        merchant = self.merchant_list.get(merchant_name)
        if merchant:
            return merchant["menu"]
        return _result(False, f"Merchant '{merchant_name}' does not exist")

    def view_orders(self, user_name: str) -> dict:
        mine = [o for o in self.orders if o["user_name"] == user_name]
        if not mine:
            return _result(False, "User has no order records")
        return {"status": True, "orders": mine}

    def search_orders(self, keyword: str) -> dict:
        key = keyword.lower()
        found = [
            o
            for o in self.orders
            if key in o["merchant_name"].lower()
            or any(key in i["product"].lower() for i in o.get("items", []))
        ]
        if not found:
            return _result(False, "No matching orders found")
        return {"status": True, "orders": found}
