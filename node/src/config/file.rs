//! The TOML form of [`NodeConfig`]: flat kebab-case keys, exactly the long flags of
//! [`NodeArgs`] without `--config`/`--no-metrics` ([`file_keys`]).
//!
//! `#[serde(deny_unknown_fields)]` does not work with the flattened [`LogConfig`] /
//! [`StoreConfig`](super::StoreConfig), so a file's keys are checked against that set before
//! it is deserialized; fields of the crate configs without a flag (`preallocate`, the store's
//! `max-tag-bytes`, ...) are neither read nor written and keep their defaults.
//!
//! [`LogConfig`]: super::LogConfig

use std::path::Path;

use clap::CommandFactory;

use super::ConfigError;
use super::NodeArgs;
use super::NodeConfig;

/// Flags of [`NodeArgs`] that are not config keys.
const NOT_KEYS: [&str; 5] = ["config", "no-metrics", "no-rocketmq", "help", "version"];

/// The keys a config file may hold, in the order `raftmq-node --help` lists them.
pub fn file_keys() -> Vec<String> {
    NodeArgs::command()
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| !NOT_KEYS.contains(l))
        .map(str::to_string)
        .collect()
}

/// The 1-based line that sets `key` (`key = ...`, `key.x = ...` or `[key]`), if any.
fn line_of(text: &str, key: &str) -> Option<usize> {
    let head = |l: &str| {
        let l = l.trim().trim_start_matches('[');
        l.split(['=', '.', ']']).next().map(str::trim) == Some(key)
    };
    text.lines().position(head).map(|n| n + 1)
}

/// A value error inside the flattened log or store part names neither key nor line; find the
/// key whose value alone fails and say so.
fn name_the_key(text: &str, table: &toml::Table, e: toml::de::Error) -> toml::de::Error {
    let fails_alone = |(k, v): &(&String, &toml::Value)| {
        let one = toml::Table::from_iter([((*k).clone(), (*v).clone())]);
        toml::Value::Table(one).try_into::<NodeConfig>().is_err()
    };
    match table.iter().find(fails_alone) {
        Some((k, _)) if !e.to_string().contains(k.as_str()) => {
            let line = line_of(text, k).map_or(String::new(), |n| format!(" (line {n})"));
            let reason = e.message().to_string();
            serde::de::Error::custom(format!("invalid value of key `{k}`{line}: {reason}"))
        }
        _ => e,
    }
}

fn parse_error(path: &Path, e: toml::de::Error) -> ConfigError {
    ConfigError::Parse {
        path: path.to_path_buf(),
        source: Box::new(e),
    }
}

impl NodeConfig {
    /// Parses a TOML document (missing keys take their defaults; unknown keys are errors).
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let table: toml::Table = text.parse().map_err(|e| parse_error(path, e))?;
        let keys = file_keys();
        if let Some(k) = table.keys().find(|k| !keys.contains(k)) {
            let line = line_of(text, k).map_or(String::new(), |n| format!(" (line {n})"));
            let msg = format!("unknown key `{k}`{line}; the keys are: {}", keys.join(", "));
            return Err(parse_error(path, serde::de::Error::custom(msg)));
        }
        toml::from_str(text).map_err(|e| parse_error(path, name_the_key(text, &table, e)))
    }

    /// Reads and parses a TOML file (not yet validated).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml_str(&text, path)
    }

    /// This config as a TOML document: every key of [`file_keys`] that has a value (unset
    /// advertised and join addresses are left out), one per line, in that order.
    pub fn to_toml_string(&self) -> String {
        let keys = file_keys();
        self.to_toml_keys(&keys.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Like [`to_toml_string`](Self::to_toml_string), but only the given keys (e.g. the ones
    /// a deploy tool sets; the node gives the others their defaults). Each must be one of
    /// [`file_keys`].
    pub fn to_toml_keys(&self, keys: &[&str]) -> String {
        let table =
            toml::Table::try_from(self).expect("NodeConfig has only TOML-representable fields");
        let known = file_keys();
        debug_assert!(
            keys.iter().all(|k| known.iter().any(|n| n == k)),
            "not config keys: {keys:?}"
        );
        let mut out = String::new();
        for k in known.iter().filter(|k| keys.contains(&k.as_str())) {
            if let Some(v) = table.get(k) {
                out.push_str(&format!("{k} = {v}\n"));
            }
        }
        out
    }
}
