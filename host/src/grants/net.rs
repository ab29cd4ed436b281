//! Network grants: which origins a plugin may send HTTP requests to.
//!
//! A grant is written `scheme://host[:port]`: the scheme is `http` or
//! `https`, the host a DNS name, an IP literal (IPv6 in brackets) or a
//! `*.suffix` wildcard, and the port defaults to the scheme's. Every
//! outgoing `wasi:http` request is checked against the call's grants
//! ([`NetPolicy`]), then sent by the host itself ([`send`]): it resolves the
//! name, refuses addresses that are not public (unless a grant names that
//! address), connects to the vetted address, never follows redirects, caps
//! both bodies, adds granted secrets and records everything in the audit
//! log. `wasi:sockets` is always denied ([`socket_refusal`]), name lookups
//! included ([`lookup`]), and each attempt recorded.

pub(crate) mod lookup;
pub mod send;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wasmtime_wasi::WasiCtxBuilder;

use crate::audit::AuditScope;

pub use send::{
    NetGate, NetHooks, REQUEST_BODY_LIMIT, RESPONSE_BODY_LIMIT, Refusal, refusal_note,
    socket_refusal,
};

/// Wires a call's sockets: they stay off. Without an audit log none can
/// be created. With one they can, so that each address a socket would
/// connect, listen or send to is refused *and recorded*
/// ([`socket_refusal`]); name lookups are never allowed ([`lookup`]).
pub fn wire_sockets(wasi: &mut WasiCtxBuilder, audit: Option<&AuditScope>) {
    if let Some(scope) = audit {
        wasi.allow_tcp(true)
            .allow_udp(true)
            .socket_addr_check(socket_refusal(scope.clone()));
    }
}

/// A correct grant, shown in every syntax error.
const EXAMPLE: &str =
    "write it like https://api.example.com, https://*.example.com or http://127.0.0.1:8080";

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain HTTP, port 80 by default.
    Http,
    /// HTTP over TLS, port 443 by default.
    Https,
}

impl Scheme {
    /// Parses a scheme name, any case.
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "http" => Some(Self::Http),
            "https" => Some(Self::Https),
            _ => None,
        }
    }

    /// The scheme's default port.
    pub fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }

    /// The scheme's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

/// The host part of a grant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// One DNS name, lowercase, without a trailing dot.
    Name(String),
    /// `*.suffix`: any name ending in `.suffix` (not `suffix` itself).
    Wildcard(String),
    /// One address, and only that address.
    Ip(IpAddr),
}

impl HostPattern {
    /// Parses a host pattern on its own: a name, `*.suffix`, or an IP
    /// literal (IPv6 in brackets).
    pub fn parse(text: &str) -> Result<Self, String> {
        parse_host_pattern(text.trim())
    }

    /// Whether every host `other` matches is matched by `self` too.
    pub fn covers(&self, other: &HostPattern) -> bool {
        match (self, other) {
            (Self::Name(a), Self::Name(b)) => a == b,
            (Self::Ip(a), Self::Ip(b)) => a == b,
            (Self::Wildcard(suffix), Self::Name(name)) => {
                host_matches(&format!("*.{suffix}"), name)
            }
            (Self::Wildcard(a), Self::Wildcard(b)) => a == b || b.ends_with(&format!(".{a}")),
            _ => false,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(name) => f.write_str(name),
            Self::Wildcard(suffix) => write!(f, "*.{suffix}"),
            Self::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Self::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// One granted origin pattern, such as `https://api.github.com` or
/// `https://*.githubusercontent.com`. Validated when parsed or
/// deserialised; serialised in its normal form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NetGrant {
    scheme: Scheme,
    host: HostPattern,
    port: u16,
}

impl NetGrant {
    /// Parses `scheme://host[:port]`. The error says what is wrong and
    /// shows a correct grant.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let fail = |what: String| Err(format!("bad network grant `{text}`: {what}; {EXAMPLE}"));
        let Some((scheme, rest)) = text.split_once("://") else {
            return fail("it has no scheme (http:// or https://)".into());
        };
        let Some(scheme) = Scheme::parse(scheme) else {
            return fail(format!("the scheme `{scheme}` is not http or https"));
        };
        // One trailing slash is harmless; anything after it is a path.
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if let Some(c) = authority.chars().find(|c| matches!(c, '/' | '?' | '#')) {
            let part = match c {
                '/' => "a path",
                '?' => "a query",
                _ => "a fragment",
            };
            return fail(format!(
                "a grant names an origin only, without {part} (drop everything from `{c}`)"
            ));
        }
        if authority.contains('@') {
            return fail("a grant cannot carry a user name or password".into());
        }
        let (host, port) = match split_authority(authority) {
            Ok(parts) => parts,
            Err(what) => return fail(what),
        };
        let port = match port {
            None => scheme.default_port(),
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port != 0 => port,
                _ => return fail(format!("the port `{port}` is not a number from 1 to 65535")),
            },
        };
        let host = match parse_host_pattern(host) {
            Ok(host) => host,
            Err(what) => return fail(what),
        };
        Ok(Self { scheme, host, port })
    }

    /// A grant of exactly `origin`: its scheme, host (a name or an
    /// address, never a wildcard) and port.
    pub fn exactly(origin: &Origin) -> Self {
        Self {
            scheme: origin.scheme,
            host: match &origin.host {
                RequestHost::Name(name) => HostPattern::Name(name.clone()),
                RequestHost::Ip(ip) => HostPattern::Ip(*ip),
            },
            port: origin.port,
        }
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The host pattern.
    pub fn host(&self) -> &HostPattern {
        &self.host
    }

    /// The port (the scheme's default when none was written).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether every request `other` allows is also allowed by `self`:
    /// an update that replaces `self` by `other` does not widen it.
    pub fn covers(&self, other: &NetGrant) -> bool {
        self.scheme == other.scheme && self.port == other.port && self.host.covers(&other.host)
    }

    /// Whether a request to `host` on `scheme` and `port` is within this
    /// grant. A name grant never matches an address, and an address grant
    /// only that address.
    pub fn allows(&self, scheme: Scheme, host: &RequestHost, port: u16) -> bool {
        if self.scheme != scheme || self.port != port {
            return false;
        }
        match (&self.host, host) {
            (HostPattern::Name(pattern), RequestHost::Name(name)) => pattern == name,
            (HostPattern::Wildcard(suffix), RequestHost::Name(name)) => {
                name.len() > suffix.len() + 1
                    && name.ends_with(suffix.as_str())
                    && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
            }
            (HostPattern::Ip(granted), RequestHost::Ip(ip)) => granted == ip,
            _ => false,
        }
    }
}

impl super::Capability for NetGrant {
    const WORD: &'static str = "net";
    const ALIASES: &'static [&'static str] = &["network"];
    const LABEL: &'static str = "network";
    const CONSENT_RANK: u8 = 0;
    const SAY_NONE: bool = true;
    const EXAMPLE: &'static str = "\"https://api.example.com\"";

    /// The pattern in its normal form.
    fn key(&self) -> String {
        self.to_string()
    }

    fn words(&self) -> String {
        self.to_string()
    }

    fn is_within(&self, granted: &Self) -> bool {
        granted.covers(self)
    }

    /// The same pattern; else one the new pattern covers (it widens it);
    /// else one that covers the new pattern (it narrows it).
    fn counterpart(&self, older: &[Self]) -> Option<usize> {
        older
            .iter()
            .position(|old| old == self)
            .or_else(|| older.iter().position(|old| self.covers(old)))
            .or_else(|| older.iter().position(|old| old.covers(self)))
    }

    fn still_allowed_by(&self, newer: &[Self]) -> bool {
        newer.iter().any(|new| new.covers(self))
    }

    fn check_value(value: &str) -> Result<(), String> {
        Self::parse(value).map(drop)
    }

    /// Checked when parsed; nothing more to check.
    fn validate(&self) -> Result<(), super::EntryError> {
        Ok(())
    }
}

impl fmt::Display for NetGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme.as_str(), self.host)?;
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for NetGrant {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::parse(text)
    }
}

impl TryFrom<String> for NetGrant {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        Self::parse(&text)
    }
}

impl From<NetGrant> for String {
    fn from(grant: NetGrant) -> String {
        grant.to_string()
    }
}

/// Splits `host[:port]`, with an IPv6 host in brackets.
fn split_authority(authority: &str) -> Result<(&str, Option<&str>), String> {
    if authority.is_empty() {
        return Err("it has no host".into());
    }
    if let Some(rest) = authority.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err("the IPv6 address has no closing `]`".into());
        };
        return match after {
            "" => Ok((&authority[..host.len() + 2], None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((&authority[..host.len() + 2], Some(port))),
                None => Err(format!("unexpected `{after}` after the IPv6 address")),
            },
        };
    }
    match authority.split_once(':') {
        Some((_, port)) if port.contains(':') => {
            Err("an IPv6 address must be written in brackets, like [2001:db8::1]".into())
        }
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((authority, None)),
    }
}

/// Parses a grant's host: a name, `*.suffix` or an address in its usual
/// form (dotted-decimal IPv4, bracketed IPv6).
fn parse_host_pattern(host: &str) -> Result<HostPattern, String> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| HostPattern::Ip(canonical_ip(IpAddr::V6(ip))))
            .map_err(|_| format!("`{inner}` is not an IPv6 address"));
    }
    if let Some(suffix) = host.strip_prefix("*.") {
        let suffix = suffix.trim_end_matches('.').to_ascii_lowercase();
        check_dns_name(&suffix)?;
        if numeric_label(suffix.rsplit('.').next().unwrap_or_default()) {
            return Err(format!("`*.{suffix}` is not a name pattern"));
        }
        if !suffix.contains('.') {
            return Err(format!(
                "`*.{suffix}` is too broad; a wildcard needs a suffix of at least two labels, like *.example.com"
            ));
        }
        return Ok(HostPattern::Wildcard(suffix));
    }
    if host.contains('*') {
        return Err(format!(
            "`{host}`: a wildcard is allowed only as a whole first label, like *.example.com"
        ));
    }
    match normalize_host(host)? {
        RequestHost::Ip(IpAddr::V4(ip)) if host.trim_end_matches('.') != ip.to_string() => Err(
            format!("`{host}` is the address {ip} written unusually; write it as {ip}"),
        ),
        RequestHost::Ip(ip) => Ok(HostPattern::Ip(ip)),
        RequestHost::Name(name) => Ok(HostPattern::Name(name)),
    }
}

/// A request's host after normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestHost {
    /// A DNS name, lowercase, without a trailing dot.
    Name(String),
    /// An address; IPv4-mapped and IPv4-compatible IPv6 are given as IPv4.
    Ip(IpAddr),
}

impl fmt::Display for RequestHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(name) => f.write_str(name),
            Self::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Self::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// Normalises a host as a request names it. Every way of writing an IPv4
/// address that resolvers accept — one decimal number (`2130706433`), hex
/// (`0x7f000001`), octal (`0177.0.0.1`), short (`127.1`) or mixed — is read
/// as that address; a numeric-looking host that is no valid address is
/// refused rather than looked up as a name.
pub fn normalize_host(raw: &str) -> Result<RequestHost, String> {
    if let Some(inner) = raw.strip_prefix('[') {
        let Some(inner) = inner.strip_suffix(']') else {
            return Err(format!("`{raw}` has no closing `]`"));
        };
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| RequestHost::Ip(canonical_ip(IpAddr::V6(ip))))
            .map_err(|_| format!("`{inner}` is not an IPv6 address"));
    }
    let host = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
    if host.is_empty() {
        return Err("the host is empty".into());
    }
    if let Ok(ip) = host.parse::<Ipv6Addr>() {
        return Ok(RequestHost::Ip(canonical_ip(IpAddr::V6(ip))));
    }
    let labels: Vec<&str> = host.split('.').collect();
    if labels.last().is_some_and(|l| numeric_label(l)) {
        return parse_loose_ipv4(&labels)
            .map(|ip| RequestHost::Ip(IpAddr::V4(ip)))
            .ok_or_else(|| format!("`{raw}` looks like a numeric address but is not a valid one"));
    }
    check_dns_name(&host)?;
    Ok(RequestHost::Name(host))
}

/// Whether a label reads as a number in any base resolvers accept.
fn numeric_label(label: &str) -> bool {
    if let Some(hex) = label.strip_prefix("0x") {
        return hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    !label.is_empty() && label.chars().all(|c| c.is_ascii_digit())
}

/// Reads one label as `inet_aton` does: `0x` hex, leading-zero octal or
/// decimal.
fn parse_number(label: &str) -> Option<u64> {
    if let Some(hex) = label.strip_prefix("0x") {
        if hex.is_empty() {
            return Some(0);
        }
        return (hex.len() <= 16).then(|| u64::from_str_radix(hex, 16).ok())?;
    }
    if label.len() > 1
        && let Some(octal) = label.strip_prefix('0')
    {
        return u64::from_str_radix(octal, 8).ok();
    }
    label.parse::<u64>().ok()
}

/// Parses `a`, `a.b`, `a.b.c` or `a.b.c.d` with every part in any base;
/// the last part fills the remaining bytes.
fn parse_loose_ipv4(labels: &[&str]) -> Option<Ipv4Addr> {
    if labels.is_empty() || labels.len() > 4 {
        return None;
    }
    let numbers: Vec<u64> = labels
        .iter()
        .map(|l| {
            if numeric_label(l) {
                parse_number(l)
            } else {
                None
            }
        })
        .collect::<Option<_>>()?;
    let (last, leading) = numbers.split_last()?;
    let mut value: u64 = 0;
    for (i, part) in leading.iter().enumerate() {
        if *part > 255 {
            return None;
        }
        value |= part << (8 * (3 - i));
    }
    let room = 8 * (4 - leading.len());
    if room < 64 && *last >= 1u64 << room {
        return None;
    }
    value |= last;
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

/// Checks a DNS name's syntax: labels of letters, digits and hyphens (and
/// underscores, which some services use), 1 to 63 long, 253 in all.
fn check_dns_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 253 {
        return Err(format!("`{name}` is not a valid host name"));
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            let hint = if name.is_ascii() {
                ""
            } else {
                " (write an international name in its xn-- form)"
            };
            return Err(format!("`{name}` is not a valid host name{hint}"));
        }
    }
    Ok(())
}

/// An IPv6 address that carries an IPv4 one (IPv4-mapped `::ffff:a.b.c.d`
/// or IPv4-compatible `::a.b.c.d`) as that IPv4 address.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let s = v6.segments();
            // `::` and `::1` are IPv6's own unspecified and loopback.
            if s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1) {
                return IpAddr::V4(Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7])));
            }
            ip
        }
        IpAddr::V4(_) => ip,
    }
}

/// Why a plugin may not reach `ip` without a grant naming it, or `None`
/// for a public address.
pub fn address_refusal(ip: IpAddr) -> Option<&'static str> {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => ipv4_refusal(v4),
        IpAddr::V6(v6) => ipv6_refusal(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn ipv4_refusal(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: &[([u8; 4], u32, &str)] = &[
        ([169, 254, 169, 254], 32, "a cloud metadata address"),
        ([100, 100, 100, 200], 32, "a cloud metadata address"),
        ([255, 255, 255, 255], 32, "the broadcast address"),
        ([0, 0, 0, 0], 8, "an unspecified (this-network) address"),
        ([127, 0, 0, 0], 8, "a loopback address"),
        ([10, 0, 0, 0], 8, "a private address"),
        ([172, 16, 0, 0], 12, "a private address"),
        ([192, 168, 0, 0], 16, "a private address"),
        ([169, 254, 0, 0], 16, "a link-local address"),
        ([100, 64, 0, 0], 10, "a carrier-grade NAT address"),
        ([192, 0, 0, 0], 24, "a reserved protocol address"),
        ([192, 0, 2, 0], 24, "a documentation address"),
        ([198, 51, 100, 0], 24, "a documentation address"),
        ([203, 0, 113, 0], 24, "a documentation address"),
        ([192, 88, 99, 0], 24, "a reserved relay address"),
        ([198, 18, 0, 0], 15, "a benchmarking address"),
        ([224, 0, 0, 0], 4, "a multicast address"),
        ([240, 0, 0, 0], 4, "a reserved address"),
    ];
    RANGES
        .iter()
        .find(|(net, bits, _)| in_v4(ip, *net, *bits))
        .map(|(_, _, why)| *why)
}

fn ipv6_refusal(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let bits = u128::from(ip);
    let in_net = |net: u128, len: u32| bits >> (128 - len) == net >> (128 - len);
    if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        return Some("a cloud metadata address");
    }
    if ip.is_unspecified() {
        return Some("an unspecified address");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    // Translation prefixes carry an IPv4 address: judge that one.
    if in_net(0x0064_ff9b_u128 << 96, 96) {
        return ipv4_refusal(Ipv4Addr::from((bits & 0xffff_ffff) as u32));
    }
    if s[0] == 0x2002 {
        let v4 = (u32::from(s[1]) << 16) | u32::from(s[2]);
        return ipv4_refusal(Ipv4Addr::from(v4));
    }
    if in_net(0xfc00_u128 << 112, 7) {
        return Some("a private (unique local) address");
    }
    if in_net(0xfe80_u128 << 112, 10) {
        return Some("a link-local address");
    }
    if in_net(0xfec0_u128 << 112, 10) {
        return Some("a private (site-local) address");
    }
    if in_net(0xff00_u128 << 112, 8) {
        return Some("a multicast address");
    }
    if in_net(0x2001_0db8_u128 << 96, 32) || in_net(0x3fff_u128 << 112, 20) {
        return Some("a documentation address");
    }
    if in_net(0x2001_0002_u128 << 96, 48) {
        return Some("a benchmarking address");
    }
    if in_net(0x2001_u128 << 112, 23) {
        return Some("a reserved protocol address");
    }
    if !in_net(0x2000_u128 << 112, 3) {
        return Some("not a global unicast address");
    }
    None
}

/// Whether a host pattern (`api.github.com`, `*.github.com`) matches `host`.
/// Names compare case-insensitively; `*.x` matches any name ending in `.x`
/// but not `x` itself.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => pattern == host,
    }
}

/// Where a request may go, decided from the call's grants.
#[derive(Debug, Clone, Default)]
pub struct NetPolicy {
    grants: Vec<NetGrant>,
}

/// A request's origin, parsed from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The scheme.
    pub scheme: Scheme,
    /// The host, normalised.
    pub host: RequestHost,
    /// The port, the scheme's default when none was given.
    pub port: u16,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme.as_str(), self.host)?;
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

impl Origin {
    /// Parses a request's scheme and authority (`host[:port]`).
    pub fn parse(scheme: &str, authority: &str) -> Result<Self, String> {
        let scheme =
            Scheme::parse(scheme).ok_or_else(|| format!("the scheme `{scheme}` is not allowed"))?;
        if authority.contains('@') {
            return Err("a request URL cannot carry a user name or password".into());
        }
        let (host, port) = split_authority(authority)?;
        let port = match port {
            None | Some("") => scheme.default_port(),
            Some(port) => port
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("the port `{port}` is not valid"))?,
        };
        Ok(Self {
            scheme,
            host: normalize_host(host)?,
            port,
        })
    }
}

impl NetPolicy {
    /// The policy for a call granted `grants`.
    pub fn new(grants: Vec<NetGrant>) -> Self {
        Self { grants }
    }

    /// Adds `grant` for the rest of the call.
    pub fn grant(&mut self, grant: NetGrant) {
        if !self.grants.contains(&grant) {
            self.grants.push(grant);
        }
    }

    /// Whether no request may go anywhere.
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// Checks a request's origin against the grants: scheme and port must
    /// match a grant exactly and the host its pattern; `Err` says why not.
    pub fn check(&self, origin: &Origin) -> Result<(), String> {
        if self
            .grants
            .iter()
            .any(|g| g.allows(origin.scheme, &origin.host, origin.port))
        {
            return Ok(());
        }
        if self.grants.is_empty() {
            return Err(format!(
                "{origin} is not granted: the plugin has no network grant"
            ));
        }
        let granted: Vec<String> = self.grants.iter().map(NetGrant::to_string).collect();
        Err(format!(
            "{origin} is not granted (granted: {})",
            granted.join(", ")
        ))
    }

    /// Checks an address the request would connect to: a public address,
    /// or one a grant for this scheme and port names explicitly.
    pub fn check_address(&self, origin: &Origin, ip: IpAddr) -> Result<(), String> {
        let ip = canonical_ip(ip);
        let Some(why) = address_refusal(ip) else {
            return Ok(());
        };
        let named = self
            .grants
            .iter()
            .any(|g| g.allows(origin.scheme, &RequestHost::Ip(ip), origin.port));
        if named {
            return Ok(());
        }
        let shown = RequestHost::Ip(ip);
        Err(format!(
            "{} resolves to {shown}, {why}; only a grant naming that address ({}://{shown}:{}) allows it",
            origin.host,
            origin.scheme.as_str(),
            origin.port
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn grant(text: &str) -> NetGrant {
        NetGrant::parse(text).unwrap()
    }

    fn v4(text: &str) -> RequestHost {
        RequestHost::Ip(IpAddr::V4(text.parse().unwrap()))
    }

    #[test]
    fn grants_parse_into_their_normal_form() {
        let cases = [
            ("https://api.github.com", "https://api.github.com"),
            ("HTTPS://API.GitHub.com/", "https://api.github.com"),
            ("https://api.github.com:443", "https://api.github.com"),
            ("http://localhost:8080", "http://localhost:8080"),
            ("http://example.com:443", "http://example.com:443"),
            (
                "https://*.githubusercontent.com",
                "https://*.githubusercontent.com",
            ),
            ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
            ("http://[::1]:9000", "http://[::1]:9000"),
            ("https://[2001:DB8::1]", "https://[2001:db8::1]"),
            ("http://[::ffff:127.0.0.1]", "http://127.0.0.1"),
            ("https://example.com.", "https://example.com"),
        ];
        for (text, normal) in cases {
            assert_eq!(grant(text).to_string(), normal, "{text}");
        }
        assert_eq!(grant("https://a.example").port(), 443);
        assert_eq!(grant("http://a.example").port(), 80);
    }

    #[test]
    fn bad_grants_say_what_is_wrong_and_show_an_example() {
        let cases = [
            ("api.github.com", "no scheme"),
            ("ftp://example.com", "not http or https"),
            ("https://example.com/path", "path"),
            ("https://example.com?x=1", "query"),
            ("https://example.com#top", "fragment"),
            ("https://user:pw@example.com", "user name"),
            ("https://", "no host"),
            ("https://example.com:0", "port"),
            ("https://example.com:99999", "port"),
            ("https://example.com:http", "port"),
            ("https://*.com", "too broad"),
            ("https://api.*.com", "wildcard"),
            ("https://*", "wildcard"),
            ("https://exa mple.com", "not a valid host name"),
            ("https://-bad.com", "not a valid host name"),
            ("https://2130706433", "write it as 127.0.0.1"),
            ("https://0x7f.1", "write it as 127.0.0.1"),
            ("https://1.2.3.999", "not a valid one"),
            ("https://::1", "brackets"),
            ("https://[::1", "closing"),
            ("https://[zz::1]", "not an IPv6"),
            ("https://bücher.de", "xn--"),
        ];
        for (text, expect) in cases {
            let err = NetGrant::parse(text).unwrap_err();
            assert!(err.contains(expect), "{text}: {err}");
            assert!(err.contains("https://api.example.com"), "{text}: {err}");
        }
    }

    #[test]
    fn grants_validate_when_deserialised_and_serialise_normalised() {
        let parsed: Vec<NetGrant> =
            serde_json::from_str(r#"["HTTPS://Example.com:443", "http://*.example.org"]"#).unwrap();
        assert_eq!(
            serde_json::to_string(&parsed).unwrap(),
            r#"["https://example.com","http://*.example.org"]"#
        );
        let err = serde_json::from_str::<Vec<NetGrant>>(r#"["example.com"]"#).unwrap_err();
        assert!(err.to_string().contains("no scheme"), "{err}");
        let parsed: NetGrant = "https://a.example".parse().unwrap();
        assert_eq!(parsed, grant("https://a.example"));
    }

    #[test]
    fn every_numeric_form_of_an_ipv4_address_is_that_address() {
        for form in [
            "127.0.0.1",
            "2130706433",
            "0x7f000001",
            "0X7F000001",
            "0177.0.0.1",
            "0177.0000.0000.0001",
            "127.1",
            "127.0.1",
            "0x7f.1",
            "0x7f.0.0.1",
            "0177.0x0.1",
            "127.0.0.1.",
            "017700000001",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
            "[::127.0.0.1]",
        ] {
            assert_eq!(normalize_host(form).unwrap(), v4("127.0.0.1"), "{form}");
        }
        assert_eq!(normalize_host("0").unwrap(), v4("0.0.0.0"));
        assert_eq!(normalize_host("0x0").unwrap(), v4("0.0.0.0"));
        assert_eq!(
            normalize_host("169.254.43518").unwrap(),
            v4("169.254.169.254")
        );
        assert_eq!(normalize_host("0xa9fea9fe").unwrap(), v4("169.254.169.254"));
        assert_eq!(normalize_host("2852039166").unwrap(), v4("169.254.169.254"));
        assert_eq!(
            normalize_host("[::1]").unwrap(),
            RequestHost::Ip("::1".parse().unwrap())
        );
    }

    #[test]
    fn ambiguous_numeric_hosts_are_refused_not_resolved() {
        for form in [
            "256.0.0.1",
            "1.2.3.4.5",
            "4294967296",
            "0x100000000",
            "08.0.0.1",
            "example.123",
            "[127.0.0.1]",
            "[::1",
        ] {
            assert!(normalize_host(form).is_err(), "{form}");
        }
    }

    #[test]
    fn names_are_lowercased_and_checked() {
        assert_eq!(
            normalize_host("API.Example.COM.").unwrap(),
            RequestHost::Name("api.example.com".into())
        );
        assert_eq!(
            normalize_host("0x7f.example.com").unwrap(),
            RequestHost::Name("0x7f.example.com".into())
        );
        for bad in ["", "a..b", "ex ample.com", "-a.com", "a/b", "a%2e.com"] {
            assert!(normalize_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn addresses_are_classified() {
        let refused = [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("fc00::1", "private"),
            ("fd12:3456::1", "private"),
            ("169.254.1.1", "link-local"),
            ("fe80::1", "link-local"),
            ("100.64.0.1", "carrier-grade NAT"),
            ("100.127.255.255", "carrier-grade NAT"),
            ("169.254.169.254", "metadata"),
            ("fd00:ec2::254", "metadata"),
            ("100.100.100.200", "metadata"),
            ("::ffff:169.254.169.254", "metadata"),
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("255.255.255.255", "broadcast"),
            ("224.0.0.1", "multicast"),
            ("ff02::1", "multicast"),
            ("192.0.2.1", "documentation"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("2001:db8::1", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("240.0.0.1", "reserved"),
            ("64:ff9b::7f00:1", "loopback"),
            ("2002:7f00:1::", "loopback"),
            ("100::1", "not a global unicast"),
        ];
        for (ip, why) in refused {
            let reason = address_refusal(ip.parse().unwrap());
            assert!(reason.is_some_and(|r| r.contains(why)), "{ip}: {reason:?}");
        }
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(address_refusal(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn covers_tells_narrower_from_wider() {
        let wide = grant("https://*.example.com");
        assert!(wide.covers(&grant("https://api.example.com")));
        assert!(wide.covers(&grant("https://*.api.example.com")));
        assert!(wide.covers(&wide));
        assert!(!wide.covers(&grant("https://example.com")));
        assert!(!wide.covers(&grant("http://api.example.com")));
        assert!(!wide.covers(&grant("https://api.example.com:8443")));
        assert!(!wide.covers(&grant("https://*.com.example")));
        assert!(!grant("https://api.example.com").covers(&wide));
        assert!(grant("https://a.example").covers(&grant("https://A.example:443")));
        assert!(!grant("https://a.example").covers(&grant("https://b.example")));
        assert!(grant("http://127.0.0.1:80").covers(&grant("http://127.0.0.1")));
        assert!(!grant("http://127.0.0.1").covers(&grant("http://localhost")));
        assert!(!grant("http://localhost").covers(&grant("http://127.0.0.1")));
    }

    #[test]
    fn requests_match_scheme_port_and_host_exactly() {
        let policy = NetPolicy::new(vec![
            grant("https://api.example.com"),
            grant("https://*.cdn.example"),
            grant("http://127.0.0.1:8080"),
        ]);
        let ok = |s: &str, a: &str| policy.check(&Origin::parse(s, a).unwrap()).is_ok();
        assert!(ok("https", "api.example.com"));
        assert!(ok("https", "API.example.com:443"));
        assert!(ok("https", "x.cdn.example"));
        assert!(ok("https", "a.b.cdn.example"));
        assert!(!ok("https", "cdn.example"));
        assert!(!ok("https", "evilcdn.example"));
        assert!(!ok("http", "api.example.com"));
        assert!(!ok("https", "api.example.com:8443"));
        assert!(!ok("https", "other.example"));
        assert!(ok("http", "127.0.0.1:8080"));
        assert!(ok("http", "2130706433:8080"));
        assert!(ok("http", "[::ffff:127.0.0.1]:8080"));
        assert!(!ok("http", "127.0.0.1:8081"));
        assert!(!ok("http", "localhost:8080"));
        let err = policy
            .check(&Origin::parse("https", "other.example").unwrap())
            .unwrap_err();
        assert!(err.contains("not granted"), "{err}");
        assert!(Origin::parse("ftp", "x.example").is_err());
        assert!(Origin::parse("http", "user@x.example").is_err());
    }

    #[test]
    fn addresses_need_to_be_public_unless_named() {
        let policy = NetPolicy::new(vec![
            grant("http://localhost:8080"),
            grant("http://127.0.0.1:9090"),
        ]);
        let local = Origin::parse("http", "localhost:8080").unwrap();
        let err = policy
            .check_address(&local, "127.0.0.1".parse().unwrap())
            .unwrap_err();
        assert!(err.contains("loopback"), "{err}");
        assert!(
            policy
                .check_address(&local, "1.1.1.1".parse().unwrap())
                .is_ok()
        );
        let named = Origin::parse("http", "localhost:9090").unwrap();
        assert!(
            policy
                .check_address(&named, "::ffff:127.0.0.1".parse().unwrap())
                .is_ok()
        );
    }

    #[test]
    fn host_patterns_match_names() {
        assert!(host_matches("api.github.com", "API.github.com."));
        assert!(host_matches("*.github.com", "api.github.com"));
        assert!(!host_matches("*.github.com", "github.com"));
        assert!(!host_matches("*.github.com", "evilgithub.com"));
    }
}
