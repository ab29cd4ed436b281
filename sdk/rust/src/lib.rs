//! Write [capstan](https://github.com/capstan-dev/capstan) tools (and
//! computed skills, see [`export_skills!`]) in Rust.
//!
//! A tool is a typed input struct and a function. The SDK exports them as a
//! WebAssembly component implementing the `capstan:plugin/tool` interface:
//! it generates each tool's JSON Schema from the input type, parses and
//! checks the JSON the model sends (an error names the offending field), and
//! turns your result or error into what the host expects.
//!
//! ```no_run
//! use capstan_sdk::prelude::*;
//!
//! /// Input of the `greet` tool.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Greet {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! fn greet(input: Greet, _ctx: &Context) -> Result<String, ToolError> {
//!     Ok(format!("Hello, {}!", input.name))
//! }
//!
//! fn tools() -> Vec<Tool> {
//!     vec![Tool::new("greet", "Greets someone by name.", greet).read_only()]
//! }
//!
//! capstan_sdk::export_tools!(tools);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2`; the `.wasm`
//! file in `target/wasm32-wasip2/release/` is the component.

mod arguments;
mod context;
mod error;
pub mod hook;
mod output;
mod skill;
mod tool;

pub mod exec;
pub mod fs;
pub mod log;

pub use context::Context;
pub use error::ToolError;
pub use hook::{Decision, Event, Hook, HookEvent, Reply};
pub use output::{Content, Output};
pub use skill::{Arguments, Skill};
pub use tool::Tool;

pub use schemars;
pub use serde;
pub use serde_json;

/// Everything a tool author usually needs, in one import.
pub mod prelude {
    pub use crate::{
        Arguments, Content, Context, Decision, Event, Hook, HookEvent, Output, Reply, Skill, Tool,
        ToolError,
    };
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}

/// Bindings generated from the `capstan:plugin` WIT package.
///
/// Tool authors do not need these; they are public so that the
/// [`export_tools!`] macro can reach them from the author's crate.
#[doc(hidden)]
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "tool-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_tool_plugin",
        default_bindings_module: "capstan_sdk::bindings",
    });

    /// The hook world, sharing the tool world's imports.
    pub mod hook_world {
        wit_bindgen::generate!({
            path: "wit",
            world: "hook-plugin",
            pub_export_macro: true,
            export_macro_name: "__export_hook_plugin",
            default_bindings_module: "capstan_sdk::bindings::hook_world",
            with: {
                "capstan:plugin/types@0.1.0": crate::bindings::capstan::plugin::types,
                "capstan:plugin/host@0.1.0": crate::bindings::capstan::plugin::host,
            },
        });
    }
}

/// Bindings of the `skill-plugin` world, for [`export_skills!`].
#[doc(hidden)]
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod skill_bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "skill-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_skill_plugin",
        default_bindings_module: "capstan_sdk::skill_bindings",
    });
}

#[doc(hidden)]
pub mod __private {
    pub use crate::hook::{handle, subscriptions};
    pub use crate::skill::{list as list_skills, load as load_skill, resource as skill_resource};
    pub use crate::tool::{call, describe};
}

/// Exports the tools returned by a function as this crate's component.
///
/// The function takes no arguments and returns `Vec<Tool>`; it is called on
/// every request (each call runs in a fresh instance anyway), so keep it
/// cheap: build the list, do no I/O.
///
/// ```ignore
/// capstan_sdk::export_tools!(tools);
/// ```
#[macro_export]
macro_rules! export_tools {
    ($tools:path) => {
        #[doc(hidden)]
        struct __CapstanToolPlugin;

        impl $crate::bindings::exports::capstan::plugin::tool::Guest for __CapstanToolPlugin {
            fn describe() -> ::std::vec::Vec<$crate::bindings::exports::capstan::plugin::tool::ToolSpec> {
                $crate::__private::describe(&$tools())
            }

            fn call(
                name: ::std::string::String,
                input: ::std::string::String,
                ctx: $crate::bindings::capstan::plugin::types::CallContext,
            ) -> ::std::result::Result<
                $crate::bindings::exports::capstan::plugin::tool::ToolOutput,
                $crate::bindings::exports::capstan::plugin::tool::ToolError,
            > {
                $crate::__private::call(&$tools(), &name, &input, ctx)
            }
        }

        $crate::bindings::__export_tool_plugin!(__CapstanToolPlugin with_types_in $crate::bindings);
    };
}

/// Exports the skills returned by a function as this crate's component
/// (the `capstan:plugin/skill` interface).
///
/// ```ignore
/// use capstan_sdk::prelude::*;
///
/// fn skills() -> Vec<Skill> {
///     vec![Skill::new("release-notes", "Drafts release notes.", |args: &Arguments| {
///         Ok(format!("Write the notes for version {}.", args.get(0).unwrap_or("next")))
///     })
///     .argument_hint("[version]")]
/// }
///
/// capstan_sdk::export_skills!(skills);
/// ```
///
/// A component offers tools or skills; build two components (listed
/// together in one plugin's `plugin.toml`) to offer both.
#[macro_export]
macro_rules! export_skills {
    ($skills:path) => {
        #[doc(hidden)]
        struct __CapstanSkillPlugin;

        impl $crate::skill_bindings::exports::capstan::plugin::skill::Guest for __CapstanSkillPlugin {
            fn list() -> ::std::vec::Vec<$crate::skill_bindings::exports::capstan::plugin::skill::SkillMeta> {
                $crate::__private::list_skills(&$skills())
            }

            fn load(
                name: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
                $crate::__private::load_skill(&$skills(), &name, &arguments)
            }

            fn resource(
                name: ::std::string::String,
                path: ::std::string::String,
            ) -> ::std::result::Result<::std::vec::Vec<u8>, ::std::string::String> {
                $crate::__private::skill_resource(&$skills(), &name, &path)
            }
        }

        $crate::skill_bindings::__export_skill_plugin!(__CapstanSkillPlugin with_types_in $crate::skill_bindings);
    };
}

/// Exports the hooks returned by a function as this crate's component.
///
/// The function takes no arguments and returns `Vec<Hook>`; it is called
/// for every event (each runs in a fresh instance), so keep it cheap.
///
/// ```ignore
/// use capstan_sdk::prelude::*;
///
/// fn no_env_files(event: &Event, _ctx: &Context) -> Result<Decision, String> {
///     match event.input_str("path") {
///         Some(path) if path.starts_with(".env") => Ok(Decision::deny("leave .env files alone")),
///         _ => Ok(Decision::Proceed),
///     }
/// }
///
/// fn hooks() -> Vec<Hook> {
///     vec![Hook::on(HookEvent::PreToolUse, no_env_files).matching("fs.write|fs.edit")]
/// }
///
/// capstan_sdk::export_hooks!(hooks);
/// ```
#[macro_export]
macro_rules! export_hooks {
    ($hooks:path) => {
        #[doc(hidden)]
        struct __CapstanHookPlugin;

        impl $crate::bindings::hook_world::exports::capstan::plugin::hook::Guest for __CapstanHookPlugin {
            fn subscriptions() -> ::std::vec::Vec<$crate::bindings::hook_world::exports::capstan::plugin::hook::Subscription> {
                $crate::__private::subscriptions(&$hooks())
            }

            fn handle(
                input: $crate::bindings::hook_world::exports::capstan::plugin::hook::EventInput,
                ctx: $crate::bindings::capstan::plugin::types::CallContext,
            ) -> ::std::result::Result<
                $crate::bindings::hook_world::exports::capstan::plugin::hook::HookOutput,
                ::std::string::String,
            > {
                $crate::__private::handle(&$hooks(), input, ctx)
            }
        }

        $crate::bindings::hook_world::__export_hook_plugin!(__CapstanHookPlugin with_types_in $crate::bindings::hook_world);
    };
}
