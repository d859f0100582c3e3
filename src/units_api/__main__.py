from units_api.cli import app

app()
