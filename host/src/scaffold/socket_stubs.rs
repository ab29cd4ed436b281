//! Replacing a component's `wasi:sockets` imports by stubs that trap.
//!
//! Language runtimes carry socket support whether or not a plugin uses it:
//! every component componentize-py builds imports the seven `wasi:sockets`
//! interfaces, because CPython's `socket` module is linked in. Install
//! refuses those imports unless the manifest requests the network (an
//! import says what a component may try), so `capstan plugin build` plugs
//! them here instead: a generated component exports each socket interface
//! with functions that trap, and is composed into the plugin, which then
//! imports no socket interface at all. A plugin that does call a socket
//! function stops with a trap, reported as a crash.
//!
//! Only the `wasi:sockets` imports are touched; every other import and
//! every export stays as it was.

use wac_graph::types::Package;
use wac_graph::{CompositionGraph, EncodeOptions};
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::decoding::DecodedWasm;
use wit_parser::{ManglingAndAbi, Resolve, WorldItem, WorldKey};

/// The interface-name prefix of the imports replaced.
const SOCKETS: &str = "wasi:sockets/";

/// The interfaces socket types refer to, which the stub must import to
/// name them (pollables, streams, durations).
const SOCKET_TYPE_SOURCES: [&str; 2] = ["wasi:io/", "wasi:clocks/"];

/// Why the socket imports could not be replaced.
#[derive(Debug, thiserror::Error)]
pub enum SocketStubError {
    /// The bytes are not a component whose WIT can be read.
    #[error("cannot read the component's WIT: {0}")]
    Decode(String),
    /// The stub component could not be generated.
    #[error("cannot generate the socket stubs: {0}")]
    Stub(String),
    /// The stub could not be composed into the component.
    #[error("cannot compose the socket stubs into the component: {0}")]
    Compose(String),
}

/// The `wasi:sockets` interfaces `component` imports, by full name
/// (`wasi:sockets/tcp@0.2.0`).
pub fn socket_imports(component: &[u8]) -> Result<Vec<String>, SocketStubError> {
    let (resolve, world) = decode(component)?;
    Ok(resolve.worlds[world]
        .imports
        .keys()
        .map(|key| resolve.name_world_key(key))
        .filter(|name| name.starts_with(SOCKETS))
        .collect())
}

/// `component` with its `wasi:sockets` imports satisfied by trapping
/// stubs, or `None` when it imports none.
pub fn stub_socket_imports(component: &[u8]) -> Result<Option<Vec<u8>>, SocketStubError> {
    let (mut resolve, world) = decode(component)?;
    let original = &resolve.worlds[world];
    let is_socket = |key: &WorldKey| resolve.name_world_key(key).starts_with(SOCKETS);
    let sockets: Vec<(WorldKey, WorldItem)> = original
        .imports
        .iter()
        .filter(|(key, _)| is_socket(key))
        .map(|(key, item)| (key.clone(), item.clone()))
        .collect();
    if sockets.is_empty() {
        return Ok(None);
    }
    let type_sources: Vec<(WorldKey, WorldItem)> = original
        .imports
        .iter()
        .filter(|(key, item)| {
            let name = resolve.name_world_key(key);
            matches!(item, WorldItem::Interface { .. })
                && SOCKET_TYPE_SOURCES
                    .iter()
                    .any(|prefix| name.starts_with(prefix))
        })
        .map(|(key, item)| (key.clone(), item.clone()))
        .collect();

    // The stub's world: the socket interfaces exported, and the interfaces
    // their types come from imported.
    let mut stub_world = original.clone();
    stub_world.name = "socket-stubs".to_string();
    stub_world.imports = type_sources.into_iter().collect();
    stub_world.exports = sockets.into_iter().collect();
    let stub_world = resolve.worlds.alloc(stub_world);

    let mut module = wit_component::dummy_module(&resolve, stub_world, ManglingAndAbi::Standard32);
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        stub_world,
        StringEncoding::UTF8,
    )
    .map_err(|e| SocketStubError::Stub(format!("{e:#}")))?;
    let stub = ComponentEncoder::default()
        .module(&module)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| SocketStubError::Stub(format!("{e:#}")))?;

    let mut graph = CompositionGraph::new();
    let compose = |e: &dyn std::fmt::Display| SocketStubError::Compose(e.to_string());
    let plugin = Package::from_bytes(
        "capstan:plugin-under-build",
        None,
        component,
        graph.types_mut(),
    )
    .map_err(|e| compose(&format!("{e:#}")))?;
    let plugin = graph.register_package(plugin).map_err(|e| compose(&e))?;
    let stub = Package::from_bytes("capstan:socket-stubs", None, stub, graph.types_mut())
        .map_err(|e| compose(&format!("{e:#}")))?;
    let stub = graph.register_package(stub).map_err(|e| compose(&e))?;
    wac_graph::plug(&mut graph, vec![stub], plugin).map_err(|e| compose(&e))?;
    let composed = graph
        .encode(EncodeOptions::default())
        .map_err(|e| compose(&e))?;
    Ok(Some(composed))
}

/// The component's resolved WIT and its world.
fn decode(component: &[u8]) -> Result<(Resolve, wit_parser::WorldId), SocketStubError> {
    match wit_parser::decoding::decode(component) {
        Ok(DecodedWasm::Component(resolve, world)) => Ok((resolve, world)),
        Ok(DecodedWasm::WitPackage(..)) => Err(SocketStubError::Decode(
            "it is a WIT package, not a component".to_string(),
        )),
        Err(e) => Err(SocketStubError::Decode(format!("{e:#}"))),
    }
}
