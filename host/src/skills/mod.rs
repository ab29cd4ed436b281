//! Skills: `SKILL.md` folders (the Agent Skills format, with Claude Code's
//! extra fields) and skill components, discovered from installed plugins,
//! `.capstan/skills/`, the user's `skills/` config folder and
//! `.claude/skills/`; listed to the model by name and description within a
//! budget, and loaded on demand through the `skill` tool.
