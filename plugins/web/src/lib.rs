//! capstan's first-party web tools: `web.fetch` reads a page as Markdown,
//! `web.search` asks the configured search API.
//!
//! Every request goes out through `wasi:http`, which the host sends only to
//! what the user allowed: for `web.fetch` the page's host (asked for when
//! not yet allowed, or decided by `web.fetch(domain:…)` rules), for
//! `web.search` the configured endpoint, with the API key added by the host
//! so this component never sees it. Redirects are followed here, one hop at
//! a time, each hop checked by the host like the first request.

mod fetch;
mod http;
mod markdown;
mod page;
mod search;
mod url;

use capstan_sdk::Tool;

/// The tools this plugin offers.
fn tools() -> Vec<Tool> {
    vec![fetch::tool(), search::tool()]
}

capstan_sdk::export_tools!(tools);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_with_descriptions() {
        let tools = tools();
        let names: Vec<&str> = tools.iter().map(Tool::name).collect();
        assert_eq!(names, ["fetch", "search"]);
        for tool in &tools {
            let schema = tool.input_schema();
            assert_eq!(schema["type"], "object", "{}", tool.name());
            assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
            for (field, property) in schema["properties"].as_object().unwrap() {
                assert!(property["description"].is_string(), "{field}");
            }
        }
    }
}
