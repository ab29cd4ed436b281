//! Optional package signatures: ed25519 in minisign format, checked
//! against the publisher keys the user trusts.
//!
//! # What is signed
//!
//! A package's *listing*: one line `<sha256 hex>  <relative path>\n` for
//! every file of the package — the files install copies, as
//! [`super::package::select`] chooses them, never the signature itself
//! ([`SIGNATURE_FILE`] at the root) — sorted by path, with `/` between
//! folder names. Signing the listing rather than an archive means a folder
//! and its `.tar.gz` carry the same signature, and any changed, added or
//! removed file breaks it.
//!
//! # Format
//!
//! `plugin.minisig` is a minisign signature of the listing, so packages can
//! be signed with the `minisign` tool (`minisign -S -m listing`) as well as
//! with [`sign`]:
//!
//! ```text
//! untrusted comment: <anything>
//! base64(algorithm "Ed" or "ED" || key id (8 bytes) || signature (64 bytes))
//! trusted comment: <text>
//! base64(global signature (64 bytes) over signature || trusted comment)
//! ```
//!
//! `Ed` signs the listing itself; `ED` (minisign's default) signs its
//! BLAKE2b-512 hash. Both are accepted. Public keys are minisign's base64
//! form, `RW...`: `Ed` || key id || the 32-byte key.
//!
//! Trusted keys come from the user config:
//!
//! ```toml
//! [[trusted_publishers]]
//! name = "Open-Meteo plugins"
//! key = "RWQ..."
//! ```

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use blake2::{Blake2b512, Digest as _};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};

/// The signature file at a package's root.
pub const SIGNATURE_FILE: &str = "plugin.minisig";

const PURE: [u8; 2] = *b"Ed";
const PREHASHED: [u8; 2] = *b"ED";
const UNTRUSTED_PREFIX: &str = "untrusted comment: ";
const TRUSTED_PREFIX: &str = "trusted comment: ";

/// Why a signature or a key was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// The signature file is not a minisign signature.
    #[error(
        "the package signature {SIGNATURE_FILE} is malformed: {reason}; ask the publisher for a \
         fresh copy, or remove the file to install the package as unsigned"
    )]
    Malformed {
        /// What is wrong.
        reason: String,
    },
    /// A public key is not a minisign ed25519 public key.
    #[error("the publisher key is malformed: {reason}; a key is minisign's base64 form, RW...")]
    BadKey {
        /// What is wrong.
        reason: String,
    },
    /// Signed with a key the user does not trust.
    #[error(
        "the package is signed with key {key_id}, which is not one of your trusted publishers; \
         if you trust its publisher, add their public key to your config.toml:\n  \
         [[trusted_publishers]]\n  name = \"...\"\n  key = \"RW...\""
    )]
    UnknownKey {
        /// The key id, in hex as minisign shows it.
        key_id: String,
    },
    /// The signature does not match: the package changed after signing,
    /// or the signature was made by someone else with the same key id.
    #[error(
        "the signature by {publisher} does not match {what}: the package was changed after it \
         was signed, or the signature is forged; refusing it"
    )]
    BadSignature {
        /// The trusted publisher the signature claims.
        publisher: String,
        /// `the package's files` or `its trusted comment`.
        what: &'static str,
    },
    /// The config's `[[trusted_publishers]]` could not be used.
    #[error("cannot use the trusted publishers in {}: {reason}", path.display())]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A package file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A publisher key the user trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedKey {
    /// The publisher's name, as shown at install ("signed by NAME").
    pub name: String,
    key_id: [u8; 8],
    key: VerifyingKey,
}

impl TrustedKey {
    /// Parses a minisign public key: the base64 `RW...` line, or a whole
    /// `.pub` file (an untrusted comment line, then that line).
    pub fn parse(name: &str, text: &str) -> Result<Self, SignatureError> {
        let bad = |reason: &str| SignatureError::BadKey {
            reason: reason.to_string(),
        };
        let line = text
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty() && !line.starts_with(UNTRUSTED_PREFIX))
            .ok_or_else(|| bad("it is empty"))?;
        let bytes = BASE64
            .decode(line)
            .map_err(|e| bad(&format!("it is not base64 ({e})")))?;
        let bytes: [u8; 42] = bytes.try_into().map_err(|bytes: Vec<u8>| {
            bad(&format!("it is {} bytes long instead of 42", bytes.len()))
        })?;
        if bytes[..2] != PURE {
            return Err(bad("it is not an ed25519 key (it must start with RW)"));
        }
        let mut key_id = [0; 8];
        key_id.copy_from_slice(&bytes[2..10]);
        let mut key = [0; 32];
        key.copy_from_slice(&bytes[10..]);
        let key = VerifyingKey::from_bytes(&key)
            .map_err(|_| bad("its 32 key bytes are not an ed25519 public key"))?;
        Ok(Self {
            name: name.to_string(),
            key_id,
            key,
        })
    }

    /// The key id, in hex as minisign shows it.
    pub fn key_id(&self) -> String {
        key_id_hex(&self.key_id)
    }

    /// The key in minisign's base64 form (`RW...`).
    pub fn to_base64(&self) -> String {
        let mut bytes = Vec::with_capacity(42);
        bytes.extend_from_slice(&PURE);
        bytes.extend_from_slice(&self.key_id);
        bytes.extend_from_slice(self.key.as_bytes());
        BASE64.encode(bytes)
    }
}

/// A key that signs packages.
pub struct SecretKey {
    key_id: [u8; 8],
    key: SigningKey,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretKey")
            .field("key_id", &key_id_hex(&self.key_id))
            .finish_non_exhaustive()
    }
}

impl SecretKey {
    /// The key made from a 32-byte seed, with a key id.
    pub fn from_seed(seed: [u8; 32], key_id: [u8; 8]) -> Self {
        Self {
            key_id,
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// Its public half, trusted under `name`.
    pub fn public_key(&self, name: &str) -> TrustedKey {
        TrustedKey {
            name: name.to_string(),
            key_id: self.key_id,
            key: self.key.verifying_key(),
        }
    }
}

/// Who signed a package, as checked by [`verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The trusted publisher's name.
    pub publisher: String,
    /// The key id, in hex.
    pub key_id: String,
    /// The signature's trusted comment (covered by the signature).
    pub trusted_comment: String,
}

/// A signature file, parsed.
struct SignatureFile {
    algorithm: [u8; 2],
    key_id: [u8; 8],
    signature: Signature,
    trusted_comment: String,
    global_signature: Signature,
}

fn parse_signature(text: &str) -> Result<SignatureFile, SignatureError> {
    let malformed = |reason: String| SignatureError::Malformed { reason };
    let mut lines = text.lines().map(|line| line.trim_end_matches('\r'));
    let mut line = |what: &str| {
        lines
            .next()
            .ok_or_else(|| malformed(format!("it ends before the {what} line")))
    };
    let untrusted = line("untrusted comment")?;
    if !untrusted.starts_with(UNTRUSTED_PREFIX) {
        return Err(malformed(format!(
            "line 1 must start with \"{UNTRUSTED_PREFIX}\""
        )));
    }
    let signature = decode(line("signature")?, 74, 2, "signature")?;
    let trusted = line("trusted comment")?;
    let trusted_comment = trusted
        .strip_prefix(TRUSTED_PREFIX)
        .ok_or_else(|| malformed(format!("line 3 must start with \"{TRUSTED_PREFIX}\"")))?;
    let global = decode(line("global signature")?, 64, 4, "global signature")?;
    let algorithm = [signature[0], signature[1]];
    if algorithm != PURE && algorithm != PREHASHED {
        return Err(malformed(format!(
            "line 2 names the algorithm {:?}; only Ed (ed25519) and ED (ed25519 over BLAKE2b) exist",
            String::from_utf8_lossy(&algorithm)
        )));
    }
    let mut key_id = [0; 8];
    key_id.copy_from_slice(&signature[2..10]);
    Ok(SignatureFile {
        algorithm,
        key_id,
        signature: signature_from(&signature[10..]),
        trusted_comment: trusted_comment.to_string(),
        global_signature: signature_from(&global),
    })
}

/// Decodes line `number`, which must be `len` bytes of base64.
fn decode(line: &str, len: usize, number: u8, what: &str) -> Result<Vec<u8>, SignatureError> {
    let bytes = BASE64
        .decode(line.trim())
        .map_err(|e| SignatureError::Malformed {
            reason: format!("line {number}, the {what}, is not base64 ({e})"),
        })?;
    if bytes.len() != len {
        return Err(SignatureError::Malformed {
            reason: format!(
                "line {number}, the {what}, is {} bytes long instead of {len}",
                bytes.len()
            ),
        });
    }
    Ok(bytes)
}

fn signature_from(bytes: &[u8]) -> Signature {
    let mut array = [0; 64];
    array.copy_from_slice(bytes);
    Signature::from_bytes(&array)
}

/// The message an algorithm signs for `listing`.
fn message(algorithm: [u8; 2], listing: &[u8]) -> Vec<u8> {
    if algorithm == PREHASHED {
        Blake2b512::digest(listing).to_vec()
    } else {
        listing.to_vec()
    }
}

/// Checks a package listing's signature against the trusted keys.
pub fn verify(
    listing: &[u8],
    sig_text: &str,
    trusted: &[TrustedKey],
) -> Result<Signed, SignatureError> {
    let file = parse_signature(sig_text)?;
    let key = trusted
        .iter()
        .find(|key| key.key_id == file.key_id)
        .ok_or_else(|| SignatureError::UnknownKey {
            key_id: key_id_hex(&file.key_id),
        })?;
    let bad = |what| SignatureError::BadSignature {
        publisher: key.name.clone(),
        what,
    };
    key.key
        .verify_strict(&message(file.algorithm, listing), &file.signature)
        .map_err(|_| bad("the package's files"))?;
    let mut global = file.signature.to_bytes().to_vec();
    global.extend_from_slice(file.trusted_comment.as_bytes());
    key.key
        .verify_strict(&global, &file.global_signature)
        .map_err(|_| bad("its trusted comment"))?;
    Ok(Signed {
        publisher: key.name.clone(),
        key_id: key_id_hex(&file.key_id),
        trusted_comment: file.trusted_comment,
    })
}

/// Signs a package listing, in the format [`verify`] reads (prehashed, as
/// minisign does by default). `trusted_comment` must be one line.
pub fn sign(listing: &[u8], secret: &SecretKey, trusted_comment: &str) -> String {
    let trusted_comment = trusted_comment.replace(['\r', '\n'], " ");
    let signature = secret.key.sign(&message(PREHASHED, listing));
    let mut line = Vec::with_capacity(74);
    line.extend_from_slice(&PREHASHED);
    line.extend_from_slice(&secret.key_id);
    line.extend_from_slice(&signature.to_bytes());
    let mut global = signature.to_bytes().to_vec();
    global.extend_from_slice(trusted_comment.as_bytes());
    let global = secret.key.sign(&global);
    format!(
        "{UNTRUSTED_PREFIX}signature from capstan key {}\n{}\n{TRUSTED_PREFIX}{trusted_comment}\n{}\n",
        key_id_hex(&secret.key_id),
        BASE64.encode(line),
        BASE64.encode(global.to_bytes()),
    )
}

/// Checks the package folder `dir`, whose files are listed in `listing`
/// (as [`FileHashes::listing`](super::store::FileHashes::listing) writes
/// it): `Ok(None)` if it carries no signature (unsigned), `Ok(Some)` naming
/// the publisher if its signature is good.
pub fn check_package(
    dir: &Path,
    listing: &[u8],
    trusted: &[TrustedKey],
) -> Result<Option<Signed>, SignatureError> {
    let sig_path = dir.join(SIGNATURE_FILE);
    let text = match std::fs::read(&sig_path) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| SignatureError::Malformed {
            reason: "it is not text".into(),
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(SignatureError::Io {
                path: sig_path,
                source,
            });
        }
    };
    verify(listing, &text, trusted).map(Some)
}

/// The `[[trusted_publishers]]` of the user config.
#[derive(serde::Deserialize)]
struct TrustedSection {
    #[serde(default)]
    trusted_publishers: Vec<PublisherEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PublisherEntry {
    name: String,
    key: String,
}

/// Reads the trusted publisher keys from the user config file. A missing
/// file, or one without `[[trusted_publishers]]`, trusts nobody.
pub fn load_trusted(config_file: &Path) -> Result<Vec<TrustedKey>, SignatureError> {
    let config = |reason: String| SignatureError::Config {
        path: config_file.to_path_buf(),
        reason,
    };
    let text = match std::fs::read_to_string(config_file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(SignatureError::Io {
                path: config_file.to_path_buf(),
                source,
            });
        }
    };
    let section: TrustedSection =
        toml::from_str(&text).map_err(|e| config(e.to_string().trim_end().to_string()))?;
    section
        .trusted_publishers
        .into_iter()
        .map(|entry| {
            if entry.name.trim().is_empty() {
                return Err(config(
                    "a [[trusted_publishers]] entry has an empty name".into(),
                ));
            }
            TrustedKey::parse(&entry.name, &entry.key).map_err(|e| {
                config(format!(
                    "the key of trusted publisher \"{}\" is unusable: {e}",
                    entry.name
                ))
            })
        })
        .collect()
}

/// A key id as minisign shows it: the 8 bytes as a little-endian number,
/// in upper-case hex.
fn key_id_hex(key_id: &[u8; 8]) -> String {
    format!("{:016X}", u64::from_le_bytes(*key_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &[u8] = b"aaaa  plugin.toml\nbbbb  weather.wasm\n";

    fn alice() -> SecretKey {
        SecretKey::from_seed([7; 32], *b"alice-id")
    }

    fn bob() -> SecretKey {
        SecretKey::from_seed([9; 32], *b"bob---id")
    }

    #[test]
    fn a_signed_listing_names_its_publisher() {
        let sig = sign(LISTING, &alice(), "weather 0.2.0");
        let signed = verify(LISTING, &sig, &[alice().public_key("Alice")]).unwrap();
        assert_eq!(signed.publisher, "Alice");
        assert_eq!(signed.trusted_comment, "weather 0.2.0");
        assert_eq!(signed.key_id, alice().public_key("Alice").key_id());
    }

    #[test]
    fn keys_round_trip_through_their_base64_form() {
        let key = alice().public_key("Alice");
        let text = key.to_base64();
        assert!(text.starts_with("RW"), "{text}");
        assert_eq!(TrustedKey::parse("Alice", &text).unwrap(), key);
        let file = format!("untrusted comment: minisign public key\n{text}\n");
        assert_eq!(TrustedKey::parse("Alice", &file).unwrap(), key);
        for bad in ["", "RW!!", "RWQ=", &BASE64.encode([b'X'; 42])] {
            assert!(
                matches!(
                    TrustedKey::parse("x", bad),
                    Err(SignatureError::BadKey { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_tampered_listing_is_refused() {
        let sig = sign(LISTING, &alice(), "c");
        let tampered = b"aaaa  plugin.toml\ncccc  weather.wasm\n";
        let err = verify(tampered, &sig, &[alice().public_key("Alice")]).unwrap_err();
        assert!(
            matches!(&err, SignatureError::BadSignature { publisher, .. } if publisher == "Alice"),
            "{err}"
        );
    }

    #[test]
    fn a_changed_trusted_comment_is_refused() {
        let sig = sign(LISTING, &alice(), "weather 0.2.0");
        let changed = sig.replace("weather 0.2.0", "weather 9.9.9");
        let err = verify(LISTING, &changed, &[alice().public_key("Alice")]).unwrap_err();
        assert!(
            matches!(
                err,
                SignatureError::BadSignature {
                    what: "its trusted comment",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_key_says_which_and_how_to_trust_it() {
        let sig = sign(LISTING, &bob(), "c");
        let err = verify(LISTING, &sig, &[alice().public_key("Alice")]).unwrap_err();
        let id = bob().public_key("Bob").key_id();
        assert!(
            matches!(&err, SignatureError::UnknownKey { key_id } if *key_id == id),
            "{err}"
        );
        assert!(err.to_string().contains("[[trusted_publishers]]"), "{err}");
    }

    #[test]
    fn a_wrong_key_under_a_trusted_id_is_refused() {
        // Bob signs with Alice's key id: the id matches, the key does not.
        let forger = SecretKey::from_seed([9; 32], *b"alice-id");
        let sig = sign(LISTING, &forger, "c");
        let err = verify(LISTING, &sig, &[alice().public_key("Alice")]).unwrap_err();
        assert!(matches!(err, SignatureError::BadSignature { .. }), "{err}");
    }

    #[test]
    fn pure_ed25519_signatures_are_accepted_too() {
        let key = alice();
        let signature = key.key.sign(LISTING);
        let mut line = b"Ed".to_vec();
        line.extend_from_slice(&key.key_id);
        line.extend_from_slice(&signature.to_bytes());
        let comment = "legacy";
        let mut global = signature.to_bytes().to_vec();
        global.extend_from_slice(comment.as_bytes());
        let text = format!(
            "untrusted comment: x\r\n{}\r\ntrusted comment: {comment}\r\n{}\r\n",
            BASE64.encode(line),
            BASE64.encode(key.key.sign(&global).to_bytes())
        );
        let signed = verify(LISTING, &text, &[key.public_key("Alice")]).unwrap();
        assert_eq!(signed.trusted_comment, "legacy");
    }

    #[test]
    fn malformed_files_say_what_is_wrong() {
        let good = sign(LISTING, &alice(), "c");
        let lines: Vec<&str> = good.lines().collect();
        let trusted = [alice().public_key("Alice")];
        let cases = [
            (String::new(), "before the untrusted comment"),
            (good.replacen("untrusted", "distrusted", 1), "line 1"),
            (lines[..2].join("\n"), "before the trusted comment"),
            (
                format!("{}\nnot base64!\n{}\n{}", lines[0], lines[2], lines[3]),
                "line 2, the signature, is not base64",
            ),
            (
                format!(
                    "{}\n{}\n{}\n{}",
                    lines[0],
                    BASE64.encode([1; 10]),
                    lines[2],
                    lines[3]
                ),
                "10 bytes long instead of 74",
            ),
            (
                format!("{}\n{}\nuntrusted: x\n{}", lines[0], lines[1], lines[3]),
                "line 3",
            ),
            (
                format!(
                    "{}\n{}\n{}\n{}",
                    lines[0],
                    BASE64.encode([b'X'; 74]),
                    lines[2],
                    lines[3]
                ),
                "algorithm",
            ),
        ];
        for (text, expected) in cases {
            match verify(LISTING, &text, &trusted) {
                Err(SignatureError::Malformed { reason }) => {
                    assert!(reason.contains(expected), "{reason} / {expected}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_package_folder_is_listed_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plugin.toml"), "name = \"w\"\n").unwrap();
        std::fs::create_dir(dir.path().join("lib")).unwrap();
        std::fs::write(dir.path().join("lib/w.wasm"), b"\0asm").unwrap();
        let listing = |dir: &Path| {
            crate::plugin::store::hash_package(dir)
                .unwrap()
                .listing()
                .into_bytes()
        };
        let text = String::from_utf8(listing(dir.path())).unwrap();
        let paths: Vec<&str> = text.lines().map(|l| &l[66..]).collect();
        assert_eq!(paths, ["lib/w.wasm", "plugin.toml"]);
        assert!(text.starts_with(&format!(
            "{:x}  lib/w.wasm\n",
            sha2::Sha256::digest(b"\0asm")
        )));

        let trusted = [alice().public_key("Alice")];
        let check = |dir: &Path| check_package(dir, &listing(dir), &trusted);
        assert_eq!(check(dir.path()).unwrap(), None);
        let sig = sign(&listing(dir.path()), &alice(), "w 1.0");
        std::fs::write(dir.path().join(SIGNATURE_FILE), sig).unwrap();
        let signed = check(dir.path()).unwrap().unwrap();
        assert_eq!(signed.publisher, "Alice");
        // Any change to a file, or a file added, breaks it.
        std::fs::write(dir.path().join("extra.txt"), "x").unwrap();
        assert!(matches!(
            check(dir.path()),
            Err(SignatureError::BadSignature { .. })
        ));
    }

    #[test]
    fn trusted_publishers_come_from_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        assert!(load_trusted(&config).unwrap().is_empty());
        let key = alice().public_key("Alice");
        std::fs::write(
            &config,
            format!(
                "[model]\nname = \"m\"\n\n[[trusted_publishers]]\nname = \"Alice\"\nkey = \"{}\"\n",
                key.to_base64()
            ),
        )
        .unwrap();
        assert_eq!(load_trusted(&config).unwrap(), [key]);
        std::fs::write(
            &config,
            "[[trusted_publishers]]\nname = \"Mallory\"\nkey = \"RWnope\"\n",
        )
        .unwrap();
        let err = load_trusted(&config).unwrap_err().to_string();
        assert!(
            err.contains("Mallory") && err.contains("config.toml"),
            "{err}"
        );
        std::fs::write(
            &config,
            "[[trusted_publishers]]\nname = \"A\"\nkey = \"x\"\nkeys = 1\n",
        )
        .unwrap();
        let err = load_trusted(&config).unwrap_err().to_string();
        assert!(err.contains("keys"), "{err}");
    }

    #[test]
    fn the_settings_loader_accepts_trusted_publishers() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let home = crate::home::Home::at(home.path().to_path_buf(), home.path().join("cache"));
        let key = alice().public_key("Alice").to_base64();
        std::fs::write(
            home.config_file(),
            format!("[[trusted_publishers]]\nname = \"Alice\"\nkey = \"{key}\"\n"),
        )
        .unwrap();
        crate::config::load(&home, ws.path()).unwrap();
        assert_eq!(load_trusted(&home.config_file()).unwrap().len(), 1);
    }
}
