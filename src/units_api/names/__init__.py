"""Display names in English and Arabic for the values of a unit's text fields."""
