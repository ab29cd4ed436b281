//! What every kind of capability has in common: the [`Capability`] trait
//! each kind implements in its own module, and the set operations written
//! once over it — whether a set is within another, how an update differs,
//! revoking and granting one entry, subtracting a set.
//!
//! A kind's lifecycle is the same everywhere:
//!
//! 1. **parse**: its serde type is the schema of its entries, for the
//!    manifest and the lockfile alike; [`Capability::validate`] and
//!    [`Capability::validate_among`] check a manifest's request;
//! 2. **cover and diff**: [`Capability::is_within`] and
//!    [`Capability::counterpart`] are all [`diff_into`] and [`all_within`]
//!    need;
//! 3. **describe**: [`Capability::words`] and the consent label;
//! 4. **wire into a call**: the kind's module turns granted entries into
//!    what a call's sandbox gets (see [`super::Grants`]).
//!
//! The kinds themselves are listed once, in [`capability_kinds!`] (invoked
//! by `grants/mod.rs`): a new kind is its own module plus one line there.

use super::{CapabilityDiff, CapabilityEntry, ReservedName};

/// What is wrong with one entry of a requested capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryError {
    /// The field of the entry at fault (`path`, `header`), if one is.
    pub field: Option<&'static str>,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl EntryError {
    /// An error about the whole entry.
    pub fn entry(message: impl Into<String>) -> Self {
        Self {
            field: None,
            message: message.into(),
        }
    }

    /// An error about one field of the entry.
    pub fn field(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            field: Some(field),
            message: message.into(),
        }
    }
}

/// One kind of capability: a folder, an origin, a variable, a secret.
///
/// The type is an entry as a manifest requests it and as the lockfile
/// records it; its serde form is the schema of both.
pub trait Capability: Sized + Clone + PartialEq + std::fmt::Debug {
    /// The word the `grant` and `revoke` commands use: `fs`, `net`.
    const WORD: &'static str;
    /// Other words the commands accept for the kind.
    const ALIASES: &'static [&'static str];
    /// The kind in consent text: `files`, `network`.
    const LABEL: &'static str;
    /// Where the kind's entries come in consent text, lowest first.
    const CONSENT_RANK: u8;
    /// Whether consent text says `LABEL none` when nothing of the kind is
    /// requested (the kinds a user looks for first: files, network).
    const SAY_NONE: bool;
    /// One entry as `plugin.toml` writes it, shown when an entry is
    /// incomplete.
    const EXAMPLE: &'static str;

    /// What names the entry to `grant` and `revoke`, and what two entries
    /// of one set may not share: a folder's path, an origin pattern, a
    /// name.
    fn key(&self) -> String;

    /// What the entry grants, in plain words, without its kind.
    fn words(&self) -> String;

    /// Whether everything this entry allows is allowed by `granted` too.
    fn is_within(&self, granted: &Self) -> bool;

    /// Which entry of an older set this one takes the place of in an
    /// update, if any: by default, the one with the same key.
    fn counterpart(&self, older: &[Self]) -> Option<usize> {
        let key = self.key();
        older.iter().position(|old| old.key() == key)
    }

    /// Whether an older entry that no newer entry takes the place of is
    /// still allowed by the newer set `newer` (so it is not shown as
    /// removed). By default it is not.
    fn still_allowed_by(&self, _newer: &[Self]) -> bool {
        false
    }

    /// Checks a value as the `grant` and `revoke` commands name an entry
    /// of the kind (`KIND VALUE`).
    fn check_value(value: &str) -> Result<(), String>;

    /// Checks an entry a manifest requests, on its own.
    fn validate(&self) -> Result<(), EntryError>;

    /// Checks an entry a manifest requests against the rest of the request
    /// `all` (a secret's hosts must be reachable, say). Nothing by default.
    fn validate_among(&self, _all: &super::Capabilities) -> Result<(), EntryError> {
        Ok(())
    }

    /// Checks the entry against the names the host keeps for itself, the
    /// variables the user configured as the model's API key (`model_keys`)
    /// among them. Nothing by default.
    fn check_reserved(&self, _model_keys: &[&str]) -> Result<(), ReservedName> {
        Ok(())
    }

    /// The entry as it is granted, from the entry a manifest requests:
    /// what must be fixed when the user consents (a program's path) is
    /// resolved now, so the consent text shows it and the lockfile records
    /// it. The entry itself by default.
    fn resolve_for_grant(&self) -> Result<Self, EntryError> {
        Ok(self.clone())
    }
}

/// Whether every entry of `requests` is within some entry of `granted`.
pub fn all_within<T: Capability>(requests: &[T], granted: &[T]) -> bool {
    requests
        .iter()
        .all(|request| granted.iter().any(|grant| request.is_within(grant)))
}

/// Adds to `diff` how `newer` differs from `older`: each newer entry is
/// unchanged, narrower or wider than the older entry it takes the place
/// of, or new; each older entry nothing takes the place of, and the newer
/// set no longer allows, is removed. `wrap` makes an entry of the diff.
pub fn diff_into<T: Capability>(
    older: &[T],
    newer: &[T],
    wrap: fn(T) -> CapabilityEntry,
    diff: &mut CapabilityDiff,
) {
    let mut replaced = vec![false; older.len()];
    for new in newer {
        let Some(i) = new.counterpart(older) else {
            diff.added.push(wrap(new.clone()));
            continue;
        };
        replaced[i] = true;
        let old = &older[i];
        if old == new {
            continue;
        }
        let pair = (wrap(old.clone()), wrap(new.clone()));
        if new.is_within(old) {
            diff.narrowed.push(pair);
        } else {
            diff.widened.push(pair);
        }
    }
    for (old, replaced) in older.iter().zip(replaced) {
        if !replaced && !old.still_allowed_by(newer) {
            diff.removed.push(wrap(old.clone()));
        }
    }
}

/// The keys of `entries`, in order.
pub fn keys<T: Capability>(entries: &[T]) -> Vec<String> {
    entries.iter().map(Capability::key).collect()
}

/// Removes the entries named `key`; whether there were any.
pub fn remove<T: Capability>(entries: &mut Vec<T>, key: &str) -> bool {
    let before = entries.len();
    entries.retain(|entry| entry.key() != key);
    entries.len() != before
}

/// Adds the entry of `requested` named `key` to `entries`, once; whether
/// `requested` has one.
pub fn add_requested<T: Capability>(entries: &mut Vec<T>, requested: &[T], key: &str) -> bool {
    let Some(found) = requested.iter().find(|entry| entry.key() == key) else {
        return false;
    };
    remove(entries, key);
    entries.push(found.clone());
    true
}

/// `entries` without those `minus` holds (matched exactly).
pub fn subtract<T: Capability>(entries: &[T], minus: &[T]) -> Vec<T> {
    entries
        .iter()
        .filter(|entry| !minus.contains(entry))
        .cloned()
        .collect()
}

/// Checks every entry a manifest requests of one kind, on its own and
/// among the whole request `all`, and that no two share a key; the first
/// failure comes with its entry's index.
pub fn validate_all<T: Capability>(
    entries: &[T],
    all: &super::Capabilities,
) -> Result<(), (usize, EntryError)> {
    for (i, entry) in entries.iter().enumerate() {
        entry.validate().map_err(|e| (i, e))?;
        let key = entry.key();
        if entries[..i].iter().any(|earlier| earlier.key() == key) {
            return Err((
                i,
                EntryError::entry(format!("`{key}` is listed twice; list it once")),
            ));
        }
    }
    for (i, entry) in entries.iter().enumerate() {
        entry.validate_among(all).map_err(|e| (i, e))?;
    }
    Ok(())
}

/// Declares the kinds of capability, each as `field: Type => Variant`, and
/// writes what is the same for all of them: the [`super::Capabilities`]
/// set (the schema of a manifest's `[capabilities]` and of the lockfile's
/// grants), its spanned twin for manifests, [`super::CapabilityKind`],
/// [`super::CapabilityEntry`] and the set operations, each kind's part
/// done by its [`Capability`] implementation.
macro_rules! capability_kinds {
    ($( $(#[$doc:meta])* $field:ident: $ty:ty => $variant:ident, )+) => {
        /// What a plugin requests in its manifest's `[capabilities]`, or
        /// what the user granted it (as recorded in the lockfile).
        #[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields, expecting = "a table such as [capabilities]")]
        pub struct Capabilities {
            $(
                $(#[$doc])*
                #[serde(default, skip_serializing_if = "Vec::is_empty")]
                pub $field: Vec<$ty>,
            )+
        }

        /// A manifest's `[capabilities]` as written: the same schema as
        /// [`Capabilities`], each entry with the bytes it spans, so that an
        /// invalid entry is reported at its line.
        #[derive(Debug, Clone, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields, expecting = "a table such as [capabilities]")]
        pub struct SpannedCapabilities {
            $(
                $(#[$doc])*
                #[serde(default)]
                pub $field: Vec<toml::Spanned<$ty>>,
            )+
        }

        impl SpannedCapabilities {
            /// The entries without their spans.
            pub fn unspanned(&self) -> Capabilities {
                Capabilities {
                    $( $field: self.$field.iter().map(|e| e.get_ref().clone()).collect(), )+
                }
            }

            /// Where entry `index` of `kind` is written.
            pub fn span(&self, kind: CapabilityKind, index: usize) -> Option<std::ops::Range<usize>> {
                match kind {
                    $( CapabilityKind::$variant => self.$field.get(index).map(toml::Spanned::span), )+
                }
            }
        }

        /// A kind of capability, as the `grant` and `revoke` commands name it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum CapabilityKind {
            $(
                $(#[$doc])*
                $variant,
            )+
        }

        impl CapabilityKind {
            /// Every kind.
            pub const ALL: &'static [CapabilityKind] = &[$(Self::$variant),+];

            /// The word the commands use.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => <$ty as Capability>::WORD, )+
                }
            }

            /// The key of the kind's list in a manifest's `[capabilities]`.
            pub fn field(self) -> &'static str {
                match self {
                    $( Self::$variant => stringify!($field), )+
                }
            }

            /// One entry as `plugin.toml` writes it.
            pub fn example(self) -> &'static str {
                match self {
                    $( Self::$variant => <$ty as Capability>::EXAMPLE, )+
                }
            }

            fn label(self) -> &'static str {
                match self {
                    $( Self::$variant => <$ty as Capability>::LABEL, )+
                }
            }

            fn consent_rank(self) -> u8 {
                match self {
                    $( Self::$variant => <$ty as Capability>::CONSENT_RANK, )+
                }
            }

            fn says_none(self) -> bool {
                match self {
                    $( Self::$variant => <$ty as Capability>::SAY_NONE, )+
                }
            }

            fn from_word(word: &str) -> Option<Self> {
                $(
                    if word == <$ty as Capability>::WORD
                        || <$ty as Capability>::ALIASES.contains(&word)
                    {
                        return Some(Self::$variant);
                    }
                )+
                None
            }

            fn check_value(self, value: &str) -> Result<(), String> {
                match self {
                    $( Self::$variant => <$ty as Capability>::check_value(value), )+
                }
            }
        }

        /// One entry of a capability set.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum CapabilityEntry {
            $(
                $(#[$doc])*
                $variant($ty),
            )+
        }

        impl CapabilityEntry {
            /// Its kind.
            pub fn kind(&self) -> CapabilityKind {
                match self {
                    $( Self::$variant(_) => CapabilityKind::$variant, )+
                }
            }

            /// What the entry grants, without its kind: `the workspace
            /// (read-only)`.
            pub fn words(&self) -> String {
                match self {
                    $( Self::$variant(entry) => entry.words(), )+
                }
            }
        }

        impl Capabilities {
            /// Whether nothing is requested.
            pub fn is_empty(&self) -> bool {
                true $( && self.$field.is_empty() )+
            }

            /// Whether every entry of `self` is covered by `granted`, each
            /// as its kind decides ([`Capability::is_within`]).
            pub fn is_within(&self, granted: &Capabilities) -> bool {
                true $( && capability::all_within(&self.$field, &granted.$field) )+
            }

            /// How `newer` differs from `self`: what it adds, removes,
            /// widens and narrows. An update whose diff
            /// [`is_wider`](CapabilityDiff::is_wider) needs consent again.
            pub fn diff(&self, newer: &Capabilities) -> CapabilityDiff {
                let mut diff = CapabilityDiff::default();
                $( capability::diff_into(&self.$field, &newer.$field, CapabilityEntry::$variant, &mut diff); )+
                diff
            }

            /// Every entry as it is granted ([`Capability::resolve_for_grant`]):
            /// run on a manifest's request before consent. The first entry
            /// that cannot be resolved comes back with its kind and index.
            pub fn resolve_for_grant(&self) -> Result<Capabilities, InvalidEntry> {
                Ok(Capabilities {
                    $( $field: self.$field.iter().enumerate().map(|(index, entry)| {
                        entry.resolve_for_grant().map_err(|error| InvalidEntry {
                            kind: CapabilityKind::$variant,
                            index,
                            error,
                        })
                    }).collect::<Result<_, _>>()?, )+
                })
            }

            /// `self` without the entries of `minus` (matched exactly).
            pub fn subtract(&self, minus: &Capabilities) -> Capabilities {
                Capabilities {
                    $( $field: capability::subtract(&self.$field, &minus.$field), )+
                }
            }

            /// Every entry, in the order consent text shows them: network,
            /// secrets, files, env.
            pub fn entries(&self) -> Vec<CapabilityEntry> {
                let mut kinds = CapabilityKind::ALL.to_vec();
                kinds.sort_by_key(|kind| kind.consent_rank());
                kinds.into_iter().flat_map(|kind| self.entries_of(kind)).collect()
            }

            /// The entries of one kind.
            pub fn entries_of(&self, kind: CapabilityKind) -> Vec<CapabilityEntry> {
                match kind {
                    $( CapabilityKind::$variant => self.$field.iter().cloned().map(CapabilityEntry::$variant).collect(), )+
                }
            }

            /// Checks a manifest's request: every entry on its own and
            /// among the rest, none listed twice.
            pub fn validate(&self) -> Result<(), InvalidEntry> {
                $(
                    capability::validate_all(&self.$field, self).map_err(|(index, error)| InvalidEntry {
                        kind: CapabilityKind::$variant,
                        index,
                        error,
                    })?;
                )+
                Ok(())
            }

            /// Checks every entry against the names the host keeps for
            /// itself, the variables the user configured as the model's
            /// API key (`model_keys`) among them; run before consent, when
            /// the configuration is known, so no answer can grant them.
            pub fn check_reserved(&self, model_keys: &[&str]) -> Result<(), ReservedName> {
                $(
                    for entry in &self.$field {
                        entry.check_reserved(model_keys)?;
                    }
                )+
                Ok(())
            }

            fn keys_of(&self, kind: CapabilityKind) -> Vec<String> {
                match kind {
                    $( CapabilityKind::$variant => capability::keys(&self.$field), )+
                }
            }

            fn remove(&mut self, kind: CapabilityKind, key: &str) -> bool {
                match kind {
                    $( CapabilityKind::$variant => capability::remove(&mut self.$field, key), )+
                }
            }

            fn add_requested(&mut self, requested: &Capabilities, kind: CapabilityKind, key: &str) -> bool {
                match kind {
                    $( CapabilityKind::$variant => capability::add_requested(&mut self.$field, &requested.$field, key), )+
                }
            }
        }
    };
}

pub(crate) use capability_kinds;
