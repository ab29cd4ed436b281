//! capstan's first-party file tools: `fs.read`, `fs.write`, `fs.edit`,
//! `fs.glob`, `fs.grep` and `fs.ls`.
//!
//! Each call runs in a fresh component instance whose only file system is
//! the workspace folder (read-only unless the user allowed writes). Every
//! path in an input is resolved against the workspace and shown back
//! relative to it.

mod atomic;
mod edit;
mod glob;
mod glob_pattern;
mod grep;
mod input_field;
mod lines;
mod ls;
mod read;
#[cfg(test)]
mod run_in_workspace;
mod text_file;
mod walk;
mod workspace_path;
mod write;

use capstan_sdk::Tool;

/// The tools this plugin offers.
fn tools() -> Vec<Tool> {
    vec![
        read::tool(),
        write::tool(),
        edit::tool(),
        glob::tool(),
        grep::tool(),
        ls::tool(),
    ]
}

capstan_sdk::export_tools!(tools);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_distinct_name_and_an_object_schema_with_descriptions() {
        let tools = tools();
        let names: Vec<&str> = tools.iter().map(Tool::name).collect();
        assert_eq!(names, ["read", "write", "edit", "glob", "grep", "ls"]);
        for tool in &tools {
            let schema = tool.input_schema();
            assert_eq!(schema["type"], "object", "{}", tool.name());
            assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
            let properties = schema["properties"].as_object().unwrap();
            for (field, property) in properties {
                assert!(
                    property["description"].is_string(),
                    "{}.{field} has no description",
                    tool.name()
                );
            }
        }
    }
}
