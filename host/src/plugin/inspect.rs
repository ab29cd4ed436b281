//! What a component imports and exports, decoded from its WIT: the tools,
//! hooks and skills it offers, and whether its imports are ones the host
//! provides and its manifest justifies.
//!
//! The host links these interfaces (any 0.2 version of the WASI ones):
//!
//! - always: `capstan:plugin/host`, `types` and `exec` (which runs nothing
//!   but what the plugin's `exec` grants allow; components in Python and
//!   JavaScript import every interface of their world, used or not);
//!   `wasi:io/error`, `poll`,
//!   `streams`; `wasi:clocks/wall-clock`, `monotonic-clock`;
//!   `wasi:random/random`, `insecure`, `insecure-seed`; `wasi:cli/environment`,
//!   `exit`, `stdin`, `stdout`, `stderr` and the `terminal-*` interfaces;
//!   `wasi:filesystem/types`, `preopens`. None of them reaches anything that
//!   is not granted: the environment holds only granted variables, the
//!   file system only granted folders.
//! - only when the manifest requests network access (`net`): `wasi:http/types`,
//!   `outgoing-handler`, and every `wasi:sockets` interface. Sockets are
//!   refused at run time even then (HTTP goes through the host, which
//!   checks each request against the grants), but a component that imports
//!   them without asking for the network says something false about itself,
//!   so it is refused at install.
//!
//! Anything else is refused, naming the import.

use wasmtime::component::Component;

use crate::grants::Capabilities;
use crate::sandbox::{CacheOutcome, LoadError, Sandbox};

/// The plugin interfaces a component may export.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exports {
    /// `capstan:plugin/tool`: tools the model can call.
    pub tool: bool,
    /// `capstan:plugin/hook`: hooks on session events.
    pub hook: bool,
    /// `capstan:plugin/skill`: skills whose text is computed.
    pub skill: bool,
}

impl Exports {
    /// The exported interfaces' short names (`tool`, `hook`, `skill`).
    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.tool, "tool"),
            (self.hook, "hook"),
            (self.skill, "skill"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }

    /// Reads short names back (as written in the lockfile).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut exports = Self::default();
        for name in names {
            match name {
                "tool" => exports.tool = true,
                "hook" => exports.hook = true,
                "skill" => exports.skill = true,
                _ => {}
            }
        }
        exports
    }
}

/// A component's interfaces, as decoded.
#[derive(Debug, Clone)]
pub struct ComponentInfo {
    /// The plugin interfaces it exports.
    pub exports: Exports,
    /// Every import, as named in the component (`wasi:io/streams@0.2.3`).
    pub imports: Vec<String>,
    /// Whether it was compiled now or found in the compile cache.
    pub cache_outcome: CacheOutcome,
}

/// A component cannot be installed.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// It does not compile.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// It imports an interface the host does not provide.
    #[error(
        "{component} imports `{import}`, which capstan does not provide to plugins; it cannot be installed"
    )]
    Unprovided {
        /// The component file.
        component: String,
        /// The import.
        import: String,
    },
    /// It imports a network interface without requesting the network.
    #[error(
        "{component} imports `{import}`, but plugin.toml requests no network access; add the hosts it needs to `net` under [capabilities], or rebuild it without networking"
    )]
    Unjustified {
        /// The component file.
        component: String,
        /// The import.
        import: String,
    },
    /// It exports none of the plugin interfaces.
    #[error(
        "{component} exports none of capstan:plugin/tool, hook or skill; is it built against the capstan plugin WIT?"
    )]
    NoPluginExports {
        /// The component file.
        component: String,
    },
}

/// What an import needs before the host links it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Requirement {
    /// Nothing: linked for every plugin.
    Nothing,
    /// A network request in the manifest.
    Network,
}

/// The interfaces the host links, by `namespace:package/interface`.
const PROVIDED: &[(&str, Requirement)] = &[
    ("capstan:plugin/host", Requirement::Nothing),
    ("capstan:plugin/types", Requirement::Nothing),
    ("capstan:plugin/exec", Requirement::Nothing),
    ("wasi:io/error", Requirement::Nothing),
    ("wasi:io/poll", Requirement::Nothing),
    ("wasi:io/streams", Requirement::Nothing),
    ("wasi:clocks/wall-clock", Requirement::Nothing),
    ("wasi:clocks/monotonic-clock", Requirement::Nothing),
    ("wasi:random/random", Requirement::Nothing),
    ("wasi:random/insecure", Requirement::Nothing),
    ("wasi:random/insecure-seed", Requirement::Nothing),
    ("wasi:cli/environment", Requirement::Nothing),
    ("wasi:cli/exit", Requirement::Nothing),
    ("wasi:cli/stdin", Requirement::Nothing),
    ("wasi:cli/stdout", Requirement::Nothing),
    ("wasi:cli/stderr", Requirement::Nothing),
    ("wasi:cli/terminal-input", Requirement::Nothing),
    ("wasi:cli/terminal-output", Requirement::Nothing),
    ("wasi:cli/terminal-stdin", Requirement::Nothing),
    ("wasi:cli/terminal-stdout", Requirement::Nothing),
    ("wasi:cli/terminal-stderr", Requirement::Nothing),
    ("wasi:filesystem/types", Requirement::Nothing),
    ("wasi:filesystem/preopens", Requirement::Nothing),
    ("wasi:http/types", Requirement::Network),
    ("wasi:http/outgoing-handler", Requirement::Network),
    ("wasi:sockets/network", Requirement::Network),
    ("wasi:sockets/instance-network", Requirement::Network),
    ("wasi:sockets/tcp", Requirement::Network),
    ("wasi:sockets/udp", Requirement::Network),
    ("wasi:sockets/tcp-create-socket", Requirement::Network),
    ("wasi:sockets/udp-create-socket", Requirement::Network),
    ("wasi:sockets/ip-name-lookup", Requirement::Network),
];

/// `wasi:io/streams@0.2.3` without its version. WASI imports must be of
/// the 0.2 series; the plugin interfaces of 0.1 (checked again when linked).
fn interface_of(import: &str) -> Option<&str> {
    let (interface, version) = match import.split_once('@') {
        Some((interface, version)) => (interface, Some(version)),
        None => (import, None),
    };
    let version_ok = match version {
        Some(v) if interface.starts_with("wasi:") => v.starts_with("0.2."),
        Some(v) if interface.starts_with("capstan:") => v.starts_with("0.1."),
        _ => false,
    };
    version_ok.then_some(interface)
}

/// Checks one import against what the host provides and what the manifest
/// requests.
pub fn check_import(
    component: &str,
    import: &str,
    requested: &Capabilities,
) -> Result<(), InspectError> {
    let requirement = interface_of(import).and_then(|interface| {
        PROVIDED
            .iter()
            .find(|(name, _)| *name == interface)
            .map(|(_, r)| *r)
    });
    match requirement {
        Some(Requirement::Nothing) => Ok(()),
        Some(Requirement::Network) if !requested.net.is_empty() => Ok(()),
        Some(Requirement::Network) => Err(InspectError::Unjustified {
            component: component.to_string(),
            import: import.to_string(),
        }),
        None => Err(InspectError::Unprovided {
            component: component.to_string(),
            import: import.to_string(),
        }),
    }
}

/// Which plugin interfaces an export name is.
fn plugin_export(name: &str) -> Option<&'static str> {
    let interface = name.split_once('@').map_or(name, |(i, _)| i);
    match interface {
        "capstan:plugin/tool" => Some("tool"),
        "capstan:plugin/hook" => Some("hook"),
        "capstan:plugin/skill" => Some("skill"),
        _ => None,
    }
}

/// Whether a component's world exports the hook interface, read from its
/// bytes without compiling it. Bytes that cannot be decoded say no; the
/// compile that follows refuses them.
pub fn exports_hook(wasm: &[u8]) -> bool {
    let Ok(wit_component::DecodedWasm::Component(resolve, world)) = wit_component::decode(wasm)
    else {
        return false;
    };
    resolve.worlds[world].exports.keys().any(|key| {
        let name = match key {
            wit_parser::WorldKey::Name(name) => Some(name.clone()),
            wit_parser::WorldKey::Interface(id) => resolve.id_of(*id),
        };
        name.is_some_and(|name| plugin_export(&name) == Some("hook"))
    })
}

/// Compiles a component through the sandbox's compile cache (so the
/// compiled form is ready for its first call) and checks its interfaces.
/// `component` names the file in messages; `requested` is what the
/// manifest asks for.
pub fn inspect(
    sandbox: &Sandbox,
    wasm: &[u8],
    sha256: &str,
    component: &str,
    requested: &Capabilities,
) -> Result<ComponentInfo, InspectError> {
    let (compiled, cache_outcome) =
        sandbox
            .compile_cache()
            .load(sandbox.engine(), wasm, sha256, component)?;
    let info = describe(sandbox, &compiled, cache_outcome);
    for import in &info.imports {
        check_import(component, import, requested)?;
    }
    if info.exports == Exports::default() {
        return Err(InspectError::NoPluginExports {
            component: component.to_string(),
        });
    }
    Ok(info)
}

/// Reads a compiled component's imports and plugin exports.
fn describe(sandbox: &Sandbox, compiled: &Component, cache_outcome: CacheOutcome) -> ComponentInfo {
    let ty = compiled.component_type();
    let engine = sandbox.engine();
    let imports = ty
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let exports = Exports::from_names(
        ty.exports(engine)
            .filter_map(|(name, _)| plugin_export(name)),
    );
    ComponentInfo {
        exports,
        imports,
        cache_outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::NetGrant;

    fn with_net() -> Capabilities {
        Capabilities {
            net: vec![serde_json::from_str::<NetGrant>("\"https://example.com\"").unwrap()],
            ..Capabilities::default()
        }
    }

    #[test]
    fn ordinary_wasi_imports_need_nothing() {
        let none = Capabilities::default();
        for import in [
            "wasi:io/streams@0.2.3",
            "wasi:cli/environment@0.2.0",
            "wasi:filesystem/preopens@0.2.6",
            "capstan:plugin/host@0.1.0",
        ] {
            check_import("a.wasm", import, &none).unwrap();
        }
    }

    #[test]
    fn network_imports_need_a_net_request() {
        let none = Capabilities::default();
        for import in [
            "wasi:http/outgoing-handler@0.2.3",
            "wasi:sockets/tcp-create-socket@0.2.0",
            "wasi:sockets/ip-name-lookup@0.2.0",
        ] {
            let err = check_import("a.wasm", import, &none).unwrap_err();
            assert!(matches!(err, InspectError::Unjustified { .. }));
            assert!(err.to_string().contains(import), "{err}");
            check_import("a.wasm", import, &with_net()).unwrap();
        }
    }

    #[test]
    fn unknown_imports_and_versions_are_refused() {
        for import in [
            "wasi:keyvalue/store@0.2.0",
            "wasi:io/streams@0.3.0",
            "capstan:plugin/host@9.0.0",
            "my:own/thing",
        ] {
            let err = check_import("a.wasm", import, &with_net()).unwrap_err();
            assert!(matches!(err, InspectError::Unprovided { .. }), "{import}");
            assert!(err.to_string().contains(import));
        }
    }

    #[test]
    fn plugin_exports_are_recognised() {
        assert_eq!(plugin_export("capstan:plugin/tool@0.1.0"), Some("tool"));
        assert_eq!(plugin_export("capstan:plugin/skill@0.1.0"), Some("skill"));
        assert_eq!(plugin_export("wasi:cli/run@0.2.0"), None);
        let exports = Exports::from_names(["tool", "hook"]);
        assert_eq!(exports.names(), vec!["tool", "hook"]);
    }
}
