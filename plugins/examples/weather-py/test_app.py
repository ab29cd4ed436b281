import os
import tempfile
import unittest
from unittest import mock

import capstan
import app


class WeatherTest(unittest.TestCase):
    def test_checks_coordinates_before_any_request(self):
        with self.assertRaises(capstan.InvalidInput) as err:
            capstan.call_tool("forecast", {"latitude": 91, "longitude": 0})
        self.assertIn("latitude", str(err.exception))

    def test_rejects_a_string_for_a_number(self):
        with self.assertRaises(capstan.InvalidInput):
            capstan.call_tool("forecast", {"latitude": "north", "longitude": 0})

    def test_writes_a_report(self):
        rows = [{"date": "2026-01-01", "min": -3.0, "max": 1.5}]
        with tempfile.TemporaryDirectory() as root, mock.patch.object(app, "daily", return_value=rows):
            with open(os.path.join(root, "places.txt"), "w") as f:
                f.write("Oslo, 59.91, 10.75\n")
            out = capstan.call_tool("report", {"places": "places.txt"}, capstan.Context(workspace=root))
            self.assertEqual(out, "wrote weather.md (1 places)")
            with open(os.path.join(root, "weather.md")) as f:
                self.assertIn("| 2026-01-01 | -3.0 | 1.5 |", f.read())


if __name__ == "__main__":
    unittest.main()
