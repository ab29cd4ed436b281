import unittest

import capstan
import app  # noqa: F401  (registers the hooks)


def pre(tool, **tool_input):
    return capstan.handle_event("pre-tool-use", {"tool_name": tool, "tool_input": tool_input})


class GuardTest(unittest.TestCase):
    def test_a_key_in_a_write_is_denied(self):
        decision = pre("fs.write", path="config.py", content="KEY = 'AKIAABCDEFGHIJKLMNOP'")
        self.assertEqual(decision.kind, "deny")
        self.assertIn("AWS", decision.value)

    def test_env_files_are_denied_and_lockfiles_asked(self):
        self.assertEqual(pre("fs.edit", path="app/.env", old="a", new="b").kind, "deny")
        self.assertEqual(pre("fs.write", path="Cargo.lock", content="").kind, "ask")

    def test_ordinary_writes_proceed(self):
        self.assertEqual(pre("fs.write", path="src/main.rs", content="fn main() {}").kind, "proceed")

    def test_prompts_about_tests_get_context(self):
        decision = capstan.handle_event("user-prompt-submit", {"prompt": "fix the failing test"})
        self.assertEqual(decision.kind, "add-context")


if __name__ == "__main__":
    unittest.main()
