"""The hand-written tasks of ``bench/quality_bench.py``: extraction and classification.

Extraction: a message and a JSON Schema of what to pull out of it; ``expect`` holds values the
message states (checked loosely: a string field counts as right when it contains the expected
text, ignoring case). Classification: a question, a text, labels, and the right label.
"""

from __future__ import annotations

from typing import Any


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
    }


S = {"type": "string"}
INT = {"type": "integer"}
N = {"type": "number"}
B = {"type": "boolean"}


def _enum(*words: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(words)}


EXTRACTION: list[dict[str, Any]] = [
    {
        "message": "Hi, I'm Maria Lopez. You can reach me at maria.lopez@example.com or call "
        "555-0134.",
        "schema": _obj({"name": S, "email": S, "phone": S}),
        "expect": {"name": "Maria Lopez", "email": "maria.lopez@example.com", "phone": "555-0134"},
    },
    {
        "message": "Order #4521: 3 blue T-shirts at $12.50 each, shipping to Berlin.",
        "schema": _obj({"order_id": INT, "item": S, "quantity": INT, "unit_price": N, "city": S}),
        "expect": {"order_id": 4521, "quantity": 3, "unit_price": 12.5, "city": "Berlin"},
    },
    {
        "message": "The team meeting is moved to Thursday at 10am in room B12.",
        "schema": _obj({"day": S, "time": S, "room": S}),
        "expect": {"day": "Thursday", "room": "B12"},
    },
    {
        "message": "John Smith, 42, works as a nurse in Toronto.",
        "schema": _obj({"name": S, "age": INT, "job": S, "city": S}),
        "expect": {"name": "John Smith", "age": 42, "job": "nurse", "city": "Toronto"},
    },
    {
        "message": "My flight AF123 from Paris to New York leaves on March 3rd.",
        "schema": _obj({"flight": S, "origin": S, "destination": S, "date": S}),
        "expect": {"flight": "AF123", "origin": "Paris", "destination": "New York"},
    },
    {
        "message": "The laptop costs 899 dollars and is in stock.",
        "schema": _obj({"product": S, "price": N, "in_stock": B}),
        "expect": {"price": 899, "in_stock": True},
    },
    {
        "message": "Please book a table for 4 people at 7pm under the name Chen.",
        "schema": _obj({"people": INT, "time": S, "name": S}),
        "expect": {"people": 4, "name": "Chen"},
    },
    {
        "message": "Recipe: pancakes. You need flour, eggs and milk. Takes 20 minutes.",
        "schema": _obj({"dish": S, "ingredients": {"type": "array", "items": S}, "minutes": INT}),
        "expect": {"dish": "pancakes", "minutes": 20},
    },
    {
        "message": "Bug report: the app crashes on startup on Android 14. Severity: high.",
        "schema": _obj({"summary": S, "platform": S, "severity": _enum("low", "medium", "high")}),
        "expect": {"severity": "high"},
    },
    {
        "message": "The Eiffel Tower is 330 metres tall and was finished in 1889.",
        "schema": _obj({"landmark": S, "height_m": INT, "year": INT}),
        "expect": {"landmark": "Eiffel Tower", "height_m": 330, "year": 1889},
    },
    {
        "message": "Invoice from Acme Corp, total 1,250.00 EUR, due on 2024-06-30.",
        "schema": _obj({"vendor": S, "total": N, "currency": S, "due_date": S}),
        "expect": {"vendor": "Acme", "currency": "EUR", "due_date": "2024-06-30"},
    },
    {
        "message": "Alice and Bob are attending; Carol cannot come.",
        "schema": _obj(
            {
                "attending": {"type": "array", "items": S},
                "declined": {"type": "array", "items": S},
            }
        ),
        "expect": {},
    },
    {
        "message": "The package weighs 2.5 kg and should arrive by Friday.",
        "schema": _obj({"weight_kg": N, "arrival_day": S}),
        "expect": {"weight_kg": 2.5, "arrival_day": "Friday"},
    },
    {
        "message": "Customer Tom Baker wants a refund for order 7781 because the item was broken.",
        "schema": _obj(
            {
                "customer": S,
                "order_id": INT,
                "request": _enum("refund", "exchange", "information"),
                "reason": S,
            }
        ),
        "expect": {"customer": "Tom Baker", "order_id": 7781, "request": "refund"},
    },
    {
        "message": "It is 18 degrees and sunny in Madrid today.",
        "schema": _obj(
            {"city": S, "temperature_c": INT, "sky": _enum("sunny", "cloudy", "rainy", "snowy")}
        ),
        "expect": {"city": "Madrid", "temperature_c": 18, "sky": "sunny"},
    },
    {
        "message": "Our address is 12 Baker Street, London, NW1 6XE, United Kingdom.",
        "schema": _obj(
            {
                "address": _obj(
                    {"street": S, "city": S, "postcode": S, "country": S},
                )
            }
        ),
        "expect": {},
    },
    {
        "message": "The book 'Dune' by Frank Herbert was published in 1965 and is science fiction.",
        "schema": _obj(
            {
                "title": S,
                "author": S,
                "year": INT,
                "genre": _enum("fiction", "science fiction", "history", "biography"),
            }
        ),
        "expect": {"title": "Dune", "author": "Frank Herbert", "year": 1965},
    },
    {
        "message": "Reminder: dentist appointment next Monday at 9:30, bring your insurance card.",
        "schema": _obj({"what": S, "when": S, "notes": S}, required=["what", "when"]),
        "expect": {},
    },
    {
        "message": "The stock of apples is 120 and of pears 45.",
        "schema": _obj(
            {
                "items": {
                    "type": "array",
                    "items": _obj({"fruit": S, "count": INT}),
                }
            }
        ),
        "expect": {},
    },
    {
        "message": "Sarah (sarah@corp.io) is the project lead; Ken (ken@corp.io) is a developer.",
        "schema": _obj(
            {
                "people": {
                    "type": "array",
                    "items": _obj({"name": S, "email": S, "role": S}),
                }
            }
        ),
        "expect": {},
    },
]

CLASSIFICATION: list[dict[str, Any]] = [
    {
        "question": "What is the sentiment of this review?",
        "text": "I love this phone, the battery lasts for days!",
        "labels": ["positive", "negative", "neutral"],
        "answer": "positive",
    },
    {
        "question": "What is the sentiment of this review?",
        "text": "This is the worst movie I have ever seen.",
        "labels": ["positive", "negative", "neutral"],
        "answer": "negative",
    },
    {
        "question": "What is the sentiment of this message?",
        "text": "The package was delivered on Tuesday.",
        "labels": ["positive", "negative", "neutral"],
        "answer": "neutral",
    },
    {
        "question": "What kind of support ticket is this?",
        "text": "The app crashes every time I open the settings page.",
        "labels": ["bug", "feature request", "question"],
        "answer": "bug",
    },
    {
        "question": "What kind of support ticket is this?",
        "text": "Could you add a dark mode to the editor?",
        "labels": ["bug", "feature request", "question"],
        "answer": "feature request",
    },
    {
        "question": "What kind of support ticket is this?",
        "text": "How do I export my data to CSV?",
        "labels": ["bug", "feature request", "question"],
        "answer": "question",
    },
    {
        "question": "What is this news sentence about?",
        "text": "The striker scored twice in the final minutes of the match.",
        "labels": ["sports", "politics", "technology", "cooking"],
        "answer": "sports",
    },
    {
        "question": "What is this news sentence about?",
        "text": "Parliament passed the new tax bill after a long debate.",
        "labels": ["sports", "politics", "technology", "cooking"],
        "answer": "politics",
    },
    {
        "question": "What is this news sentence about?",
        "text": "The new chip doubles the speed of neural network training.",
        "labels": ["sports", "politics", "technology", "cooking"],
        "answer": "technology",
    },
    {
        "question": "What is this sentence about?",
        "text": "Simmer the onions in butter, then add the rice and stock.",
        "labels": ["sports", "politics", "technology", "cooking"],
        "answer": "cooking",
    },
    {
        "question": "Is this email spam?",
        "text": "Congratulations! You won a free cruise, click here to claim your prize now!",
        "labels": ["spam", "not spam"],
        "answer": "spam",
    },
    {
        "question": "Is this email spam?",
        "text": "Hi Anna, attached are the slides for tomorrow's meeting.",
        "labels": ["spam", "not spam"],
        "answer": "not spam",
    },
    {
        "question": "Which language is this text written in?",
        "text": "Bonjour, je voudrais réserver une chambre pour deux nuits.",
        "labels": ["English", "French", "Spanish", "German"],
        "answer": "French",
    },
    {
        "question": "How urgent is this request?",
        "text": "The server is down and customers cannot pay; fix it right now!",
        "labels": ["urgent", "not urgent"],
        "answer": "urgent",
    },
    {
        "question": "How urgent is this request?",
        "text": "Whenever you have time, could you update the wiki page?",
        "labels": ["urgent", "not urgent"],
        "answer": "not urgent",
    },
    {
        "question": "What is this sentence about?",
        "text": "A cat is sleeping on the sofa.",
        "labels": ["animal", "vehicle", "food"],
        "answer": "animal",
    },
]
