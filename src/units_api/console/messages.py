"""The API's validation messages in a manager's words, per field and kind, in the page's
language. The API's own message stays with each (`Message.api`, shown as its `title`), so
nothing it says is lost; a message with no friendlier wording is shown as the API wrote it."""

from __future__ import annotations

from collections.abc import Mapping

from units_api.console import forms
from units_api.console.i18n import Language

# What a field of each name is, when the API asks for it ("Enter a price, e.g. 4850000").
WHAT: dict[str, tuple[str, str]] = {
    "name": ("a name", "الاسم"),
    "type": ("a type, e.g. apartment", "النوع، مثل apartment"),
    "city": ("a city", "المدينة"),
    "location": ("a location", "الموقع"),
    "price": ("a price, e.g. 4850000", "السعر، مثل 4850000"),
    "startingPrice": ("a starting price, e.g. 4500000", "السعر الابتدائي، مثل 4500000"),
    "maxPrice": ("a maximum price, e.g. 5200000", "أعلى سعر، مثل 5200000"),
    "surface": ("a surface in square metres, e.g. 180", "المساحة بالمتر المربع، مثل 180"),
    "bedrooms": ("a number of bedrooms, e.g. 3", "عدد غرف النوم، مثل 3"),
    "bathrooms": ("a number of bathrooms, e.g. 2", "عدد الحمامات، مثل 2"),
}
# The API's words (how a message starts) -> the kind of mistake.
_STARTS = (
    ("is required", "required"),
    ("must not be blank", "blank"),
    ("must be a non-blank name", "blank"),
    ("must be a JSON number", "number"),
    ("must be a finite number", "number"),
    ("must be a whole number", "whole"),
    ("must be greater than or equal to 0", "negative"),
    ("must have at most", "decimals"),
    ("must be at most", "large"),
    ("must be an ISO 4217", "currency"),
    ("must be an ISO 3166-1", "country"),
    ("must be an absolute http(s) URL", "url"),
    ("must be an ISO 8601 date (YYYY-MM-DD) or", "datetime"),
    ("must be an ISO 8601 date", "day"),
    ("must be one of", "choice"),
    ("Input should be", "choice"),
    ("must be less than or equal to maxPrice", "above-max"),
    ("is only for an off-plan unit", "off-plan"),
    ("String should have at most", "long"),
    ("unknown field", "unknown"),
)
WORDS = {
    "blank": "Enter text, not only spaces",
    "negative": "Enter a number of 0 or more",
    "decimals": "Too many decimal places",
    "large": "The number is too large",
    "currency": "Enter a currency code of three capitals, e.g. EGP",
    "country": "Enter a country code of two capitals, e.g. EG",
    "url": "Enter a full web address, starting with https://",
    "datetime": "Enter a date, e.g. 2028-06-30, or a date and time",
    "day": "Enter a date, e.g. 2028-06-30",
    "choice": "Choose one of the offered values",
    "above-max": "Must not be more than the maximum price",
    "off-plan": "Only with an off-plan unit",
    "long": "Too long",
    "unknown": "Unknown field",
}


class Message(str):
    """A message as the page shows it, with the API's own words beside it (`api`)."""

    api: str

    def __new__(cls, shown: str, api: str) -> Message:
        made = super().__new__(cls, shown)
        made.api = api
        return made


def _mistake(text: str) -> str | None:
    return next((kind for start, kind in _STARTS if text.startswith(start)), None)


def _kinds() -> dict[str, str]:
    """Each form field's kind by its last name (`minPrice`, `price`)."""
    form = forms.unit_form()
    kinds = {field.name: field.kind for field in form.scalars}
    for table in form.tables:
        for column in table.columns:
            kinds.setdefault(column.name, column.kind)
    for fields in form.objects.values():
        for field in fields:
            kinds.setdefault(field.name, field.kind)
    return kinds


def friendly(field: str, text: str, language: Language) -> str:
    """The API's message `text` about `field` (`paymentPlans.0.minPrice`) in a manager's
    words, or `text` itself when it has none."""
    mistake = _mistake(text)
    last = field.rsplit(".", 1)[-1]
    kind = _kinds().get(last, "")
    what = WHAT.get(field)
    if mistake in ("required", "number", "whole") and what is not None:
        return language.t("Enter {what}").format(what=what[1] if language.code == "ar" else what[0])
    if mistake == "required":
        return language.t("This is needed")
    if mistake in ("number", "whole"):
        whole = mistake == "whole" or kind == "whole"
        if whole:
            return language.t("Enter a whole number, e.g. {example}").format(example="3")
        return language.t("Enter a number, e.g. {example}").format(example="4850000")
    if mistake is not None:
        return language.t(WORDS[mistake])
    return text


def in_words(errors: Mapping[str, str], language: Language) -> dict[str, str]:
    """A 422's messages by field, each in a manager's words with the API's own kept."""
    return {field: Message(friendly(field, text, language), text) for field, text in errors.items()}
