"""The console: web pages for inventory managers, on the API's keys, scopes and policies."""
