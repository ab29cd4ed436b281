"""Forecasts from open-meteo.com: one place, or a report on every place
listed in a workspace file. Shows a Python tool using the network and files
under grants."""

import os
from typing import Optional

from capstan import Context, Failed, InvalidInput, fetch, log, progress, tool

DEFAULT_SERVER = "https://api.open-meteo.com"


def daily(latitude: float, longitude: float, days: int) -> list:
    """The daily minimum and maximum temperatures from open-meteo."""
    if not -90 <= latitude <= 90:
        raise InvalidInput("field `latitude`: must be between -90 and 90")
    if not -180 <= longitude <= 180:
        raise InvalidInput("field `longitude`: must be between -180 and 180")
    if not 1 <= days <= 16:
        raise InvalidInput("field `days`: must be between 1 and 16")
    server = os.environ.get("OPEN_METEO_URL", DEFAULT_SERVER).rstrip("/")
    url = (f"{server}/v1/forecast?latitude={latitude}&longitude={longitude}"
           f"&daily=temperature_2m_max,temperature_2m_min&forecast_days={days}&timezone=auto")
    response = fetch(url)
    if not response.ok:
        raise Failed(f"open-meteo answered {response.status}: {response.text[:200]}")
    data = response.json().get("daily", {})
    return [{"date": d, "min": lo, "max": hi}
            for d, lo, hi in zip(data.get("time", []), data.get("temperature_2m_min", []),
                                 data.get("temperature_2m_max", []))]


@tool(read_only=True, open_world=True)
def forecast(latitude: float, longitude: float, days: int = 1) -> list:
    """Daily minimum and maximum temperatures (°C) for a place.

    Args:
        latitude: Latitude in degrees, -90 to 90.
        longitude: Longitude in degrees, -180 to 180.
        days: How many days, 1 to 16.
    """
    return daily(latitude, longitude, days)


@tool(open_world=True)
def report(ctx: Context, places: str, out: str = "weather.md", days: int = 1) -> str:
    """Writes a Markdown forecast for every place in a workspace file.

    Args:
        places: A workspace file with one place per line: `name, latitude, longitude`.
        out: The Markdown file to write in the workspace.
        days: How many days, 1 to 16.
    """
    root = ctx.workspace
    if root is None:
        raise Failed("this call was not granted the workspace")
    with open(os.path.join(root, places), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    sections = []
    for number, line in enumerate(lines, 1):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            raise InvalidInput(f"{places} line {number}: expected `name, latitude, longitude`, found {line!r}")
        name, lat, lon = parts
        try:
            rows = daily(float(lat), float(lon), days)
        except ValueError:
            raise InvalidInput(f"{places} line {number}: latitude and longitude must be numbers") from None
        progress(f"fetched {name}", number, len(lines))
        table = "\n".join(f"| {r['date']} | {r['min']} | {r['max']} |" for r in rows)
        sections.append(f"## {name}\n\n| date | min °C | max °C |\n|---|---|---|\n{table}\n")
    target = os.path.join(root, out)
    temporary = target + ".partial"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write("# Forecast\n\n" + "\n".join(sections))
    os.replace(temporary, target)
    log("info", f"wrote {out}")
    return f"wrote {out} ({len(sections)} places)"
