"""The simulated airline of ACEBench's agent categories (class `Travel`).

Behaviour follows upstream `model_inference/multi_*/scenariosen/travel.py` at the pinned commit, quirks
included, because the ground-truth final states were produced by it: a failed login still books (and then
fails on the missing membership level), cancelling refunds to cash but keeps the reservation, a cabin change
after a flight change is priced on the old flight, and the clock is fixed at 2024-07-14 06:00.
"""

from __future__ import annotations

from datetime import datetime, timedelta

USERS = {
    "user1": ("Eve", "password123", 2000.0, 50000.0, "regular"),
    "user2": ("Frank", "password456", 8000.0, 8000.0, "silver"),
    "user3": ("Grace", "password789", 1000.0, 5000.0, "gold"),
}
# flight_no, origin, destination, depart, arrive, seats, economy price, business price
FLIGHTS = (
    ("CA1234", "Beijing", "Shanghai", "2024-07-15 08:00:00", "2024-07-15 10:30:00", 5, 1200, 3000),
    ("MU5678", "Shanghai", "Beijing", "2024-07-16 09:00:00", "2024-07-16 11:30:00", 3, 1900, 3000),
    ("CZ4321", "Shanghai", "Beijing", "2024-07-16 20:00:00", "2024-07-16 22:00:00", 8, 2500, 4000),
    ("CZ4352", "Shanghai", "Beijing", "2024-07-17 20:00:00", "2024-07-17 22:00:00", 8, 1600, 2500),
    ("MU3561", "Beijing", "Nanjing", "2024-07-18 08:00:00", "2024-07-18 10:00:00", 8, 1500, 4000),
    ("MU1566", "Beijing", "Nanjing", "2024-07-18 20:00:00", "2024-07-18 22:00:00", 8, 1500, 4000),
    ("CZ1765", "Nanjing", "Shenzhen", "2024-07-17 20:30:00", "2024-07-17 22:00:00", 8, 1500, 2500),
    ("CZ1765", "Nanjing", "Shenzhen", "2024-07-18 12:30:00", "2024-07-18 15:00:00", 8, 1500, 2500),
    ("MH1765", "Xiamen", "Chengdu", "2024-07-17 12:30:00", "2024-07-17 15:00:00", 8, 1500, 2500),
    ("MH2616", "Chengdu", "Xiamen", "2024-07-18 18:30:00", "2024-07-18 21:00:00", 8, 1500, 2500),
    ("MH2616", "Chengdu", "Fuzhou", "2024-07-16 18:30:00", "2024-07-16 21:00:00", 8, 1500, 2500),
)
# reservation_id, user_id, flight_no, payment, cabin, baggage, origin, destination (res_4's flight does not exist)
RESERVATIONS = (
    ("res_1", "user1", "CA1234", "bank", "Economy Class", 1, "Beijing", "Shanghai"),
    ("res_2", "user1", "MU5678", "bank", "Business Class", 1, "Shanghai", "Beijing"),
    ("res_3", "user2", "MH1765", "bank", "Business Class", 1, "Xiamen", "Chengdu"),
    ("res_4", "user2", "MU2616", "bank", "Business Class", 1, "Chengdu", "Xiamen"),
)
FREE_BAGS = {
    "regular": {"Economy Class": 1, "Business Class": 2},
    "silver": {"Economy Class": 2, "Business Class": 3},
    "gold": {"Economy Class": 3, "Business Class": 3},
}
BAG_FEE = 50
NOW = datetime(2024, 7, 14, 6, 0, 0)
_TIME = "%Y-%m-%d %H:%M:%S"


def _error(message: str) -> dict:
    return {"status": "error", "message": message}


class Travel:
    API = (
        "get_flight_details",
        "get_user_details",
        "get_reservation_details",
        "authenticate_user",
        "get_baggage_allowance",
        "find_transfer_flights",
        "calculate_baggage_fee",
        "update_balance",
        "reserve_flight",
        "modify_flight",
        "cancel_reservation",
        "process_refund",
        "calculate_price_difference",
    )
    SAVED = ("users", "reservations")

    def __init__(self) -> None:
        self.users = {
            uid: {"user_name": n, "password": pw, "cash_balance": c, "bank_balance": b, "membership_level": m}
            for uid, (n, pw, c, b, m) in USERS.items()
        }
        self.flights = [
            {
                "flight_no": no,
                "origin": origin,
                "destination": dest,
                "depart_time": dep,
                "arrival_time": arr,
                "status": "available",
                "seats_available": seats,
                "economy_price": eco,
                "business_price": bus,
            }
            for no, origin, dest, dep, arr, seats, eco, bus in FLIGHTS
        ]
        keys = (
            "reservation_id",
            "user_id",
            "flight_no",
            "payment_method",
            "cabin",
            "baggage",
            "origin",
            "destination",
        )
        self.reservations = [dict(zip(keys, row, strict=True)) for row in RESERVATIONS]

    def load_scenario(self, scenario: dict) -> None:
        """Upstream ignores the scenario for the airline."""

    def _flight(self, flight_no: str, available_only: bool = False) -> dict | None:
        return next(
            (
                f
                for f in self.flights
                if f["flight_no"] == flight_no and (not available_only or f["status"] == "available")
            ),
            None,
        )

    def get_flight_details(self, origin: str | None = None, destination: str | None = None) -> list | str:
        flights = [
            f
            for f in self.flights
            if (not origin or f["origin"] == origin) and (not destination or f["destination"] == destination)
        ]
        if not flights:
            return "There are no direct flights that meet the criteria."
        return [dict(f) for f in flights]

    def get_user_details(self, user_id: str, password: str) -> dict:
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return {k: v for k, v in user.items() if k != "password"}
        return _error("Incorrect username or password.")

    def get_reservation_details(
        self, reservation_id: str | None = None, user_id: str | None = None
    ) -> list | dict:
        if reservation_id:
            found = [r for r in self.reservations if r["reservation_id"] == reservation_id]
        elif user_id:
            found = [r for r in self.reservations if r["user_id"] == user_id]
        else:
            return _error("Please provide a valid reservation ID or user ID")
        return [{**r, "flight_info": self._flight(r["flight_no"])} for r in found]

    def authenticate_user(self, user_id: str, password: str) -> dict:
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return user
        return _error("Incorrect username or password.")

    def get_baggage_allowance(self, membership_level: str, cabin_class: str) -> int:
        return FREE_BAGS.get(membership_level, {}).get(cabin_class, 0)

    def find_transfer_flights(
        self, origin_city: str, transfer_city: str, destination_city: str
    ) -> list | str:
        def leg(a: str, b: str) -> list[dict]:
            return [
                f
                for f in self.flights
                if f["origin"] == a and f["destination"] == b and f["status"] == "available"
            ]

        pairs = [
            {"first_leg": first, "second_leg": second}
            for first in leg(origin_city, transfer_city)
            for second in leg(transfer_city, destination_city)
            if datetime.strptime(first["arrival_time"], _TIME)
            < datetime.strptime(second["depart_time"], _TIME)
        ]
        return pairs or "No connecting flights that meet the criteria were found."

    def calculate_baggage_fee(self, membership_level: str, cabin_class: str, baggage_count: int) -> int:
        return max(baggage_count - FREE_BAGS[membership_level][cabin_class], 0) * BAG_FEE

    def update_balance(self, user: dict, payment_method: str, amount: float) -> bool:
        field = {"cash": "cash_balance", "bank": "bank_balance"}.get(payment_method)
        if field is not None:
            if user[field] + amount < 0:
                return False
            user[field] += amount
        return True

    def reserve_flight(
        self, user_id: str, password: str, flight_no: str, cabin: str, payment_method: str, baggage_count: int
    ) -> str:
        user = self.authenticate_user(user_id, password)
        flight = self._flight(flight_no, available_only=True)
        price = flight["economy_price"] if cabin == "Economy Class" else flight["business_price"]
        total = price + self.calculate_baggage_fee(user["membership_level"], cabin, baggage_count)
        if payment_method not in ("cash", "bank"):
            return "Invalid payment method"
        field = f"{payment_method}_balance"
        if total > self.users[user_id][field]:
            return f"Your {payment_method} balance is insufficient. Please consider using another payment method."
        self.users[user_id][field] -= total
        flight["seats_available"] -= 1
        reservation_id = f"res_{len(self.reservations) + 1}"
        self.reservations.append(
            {
                "reservation_id": reservation_id,
                "user_id": user_id,
                "flight_no": flight_no,
                "payment_method": payment_method,
                "cabin": cabin,
                "baggage": baggage_count,
            }
        )
        return f"Booking successful. Reservation ID: {reservation_id}. Total cost: {total} yuan (including baggage fees)."

    def modify_flight(
        self,
        user_id: str,
        reservation_id: str,
        new_flight_no: str | None = None,
        new_cabin: str | None = None,
        add_baggage: int = 0,
        new_payment_method: str | None = None,
    ) -> str:
        reservation = next(
            (
                r
                for r in self.reservations
                if r["reservation_id"] == reservation_id and r["user_id"] == user_id
            ),
            None,
        )
        if not reservation:
            return "Reservation not found or user ID does not match."
        current = self._flight(reservation["flight_no"])
        if not current:
            return "Flight information not found."
        payment = new_payment_method or reservation["payment_method"]
        user = self.users[user_id]
        notes = []
        if new_flight_no and new_flight_no != reservation["flight_no"]:
            new = self._flight(new_flight_no)
            if not (
                new and new["origin"] == current["origin"] and new["destination"] == current["destination"]
            ):
                return "Flight change failed: Invalid new flight number or destination does not match."
            reservation["flight_no"] = new_flight_no
            notes.append("Flight number has been changed.")
        if new_cabin and new_cabin != reservation.get("cabin"):
            difference = self.calculate_price_difference(current, reservation["cabin"], new_cabin)
            reservation["cabin"] = new_cabin
            if difference > 0:
                paid = self.update_balance(user, payment, -difference)
                notes.append(
                    f"Cabin change successful. Price difference paid: {difference}."
                    if paid
                    else "Insufficient balance to pay the cabin price difference."
                )
            elif difference < 0:
                self.update_balance(user, payment, -difference)
                notes.append(f"Cabin change successful. Price difference refunded: {-difference}.")
        if add_baggage > 0:
            total_bags = reservation.get("baggage", 0) + add_baggage
            cost = (
                max(
                    0, total_bags - self.get_baggage_allowance(user["membership_level"], reservation["cabin"])
                )
                * BAG_FEE
            )
            if cost > 0:
                paid = self.update_balance(user, payment, -cost)
                notes.append(
                    f"Baggage has been added. Additional fee to be paid: {cost}."
                    if paid
                    else "Insufficient balance to pay the additional baggage fees."
                )
            reservation["baggage"] = total_bags
        return " ".join(notes or ["Modification completed with no additional fees."])

    def cancel_reservation(self, user_id: str, reservation_id: str, reason: str) -> str:
        user = self.users.get(user_id)
        if not user:
            return "Invalid user ID."
        reservation = next(
            (
                r
                for r in self.reservations
                if r["reservation_id"] == reservation_id and r["user_id"] == user_id
            ),
            None,
        )
        if not reservation:
            return "Invalid reservation ID or it does not belong to the user."
        flight = self._flight(reservation["flight_no"])
        if not flight:
            return "Invalid flight information."
        departure = datetime.strptime(flight["depart_time"], _TIME)
        if NOW > departure:
            return "The flight segment has been used and cannot be canceled."
        price = (
            flight["economy_price"] if reservation["cabin"] == "Economy Class" else flight["business_price"]
        )
        if reason == "The airline has canceled the flight.":
            self.process_refund(user, price)
            return f"The flight has been canceled. Your reservation will be canceled free of charge, and {price} yuan has been refunded."
        if departure - NOW > timedelta(days=1):
            self.process_refund(user, price)
            return f"More than 24 hours before departure. Free cancellation successful, {price} yuan has been refunded."
        fee = price * 0.1
        self.process_refund(user, price - fee)
        return f"Less than 24 hours before departure. A cancellation fee of {fee} yuan has been deducted, and {price - fee} yuan has been refunded."

    def process_refund(self, user: dict, amount: float) -> None:
        user["cash_balance"] += amount

    def calculate_price_difference(self, flight: dict, old_cabin: str, new_cabin: str) -> float:
        prices = {"Economy Class": flight["economy_price"], "Business Class": flight["business_price"]}
        return prices.get(new_cabin, 0) - prices.get(old_cabin, 0)
