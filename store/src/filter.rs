//! RocketMQ tag expressions: `*` (or empty) for everything, `TagA`, `TagA || TagB || ...`.
//!
//! Filtering runs in two stages: the ConsumeQueue stores only a tag hash, so the first stage
//! ([`TagFilter::matches_hash`]) may pass a message whose tag merely collides; the second stage
//! ([`TagFilter::matches_tag`]) compares the exact tag string read from the message record.

use std::collections::BTreeSet;
use std::collections::HashSet;

use crate::error::Result;
use crate::error::StoreError;
use crate::hash::tag_hash;
use crate::limits::quote;
use crate::types::TagHash;

/// Longest tag expression. Hard-coded rather than a setting: a subscription names a few tags
/// of at most `max-tag-bytes` each, and this bounds the set a pull or receive builds from
/// client input.
pub const MAX_TAG_EXPRESSION_BYTES: usize = 64 << 10;

/// A parsed tag expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TagFilter {
    /// `*` or empty: every message, with or without a tag.
    All,
    /// Any of these tags.
    Tags {
        /// The tags, sorted and deduplicated.
        tags: BTreeSet<String>,
        /// Invariant: `hashes == tags.iter().map(tag_hash).collect()`.
        hashes: HashSet<TagHash>,
    },
}

impl TagFilter {
    /// Parses an expression. Each `||`-separated part is trimmed of ASCII whitespace and must be
    /// non-empty, contain no whitespace and no `|`, and must not be `*` (which is allowed only as
    /// the whole expression).
    pub fn parse(expr: &str) -> Result<Self> {
        if expr.len() > MAX_TAG_EXPRESSION_BYTES {
            return Err(StoreError::invalid(format!(
                "tag expression {} is {} bytes; at most {MAX_TAG_EXPRESSION_BYTES} allowed",
                quote(expr),
                expr.len()
            )));
        }
        let trimmed = expr.trim();
        if trimmed.is_empty() || trimmed == "*" {
            return Ok(TagFilter::All);
        }
        let mut tags = BTreeSet::new();
        for (i, part) in trimmed.split("||").enumerate() {
            let tag = part.trim();
            let bad = |why: String| {
                StoreError::invalid(format!(
                    "tag expression {}: tag #{i} {why}; expected '*' or 'TagA || TagB'",
                    quote(expr)
                ))
            };
            if tag.is_empty() {
                return Err(bad("is empty".into()));
            }
            if tag == "*" {
                return Err(bad("is '*', which is only valid alone".into()));
            }
            if let Some(c) = tag.chars().find(|c| c.is_whitespace() || *c == '|') {
                return Err(bad(format!("{} contains {c:?}", quote(tag))));
            }
            tags.insert(tag.to_owned());
        }
        let hashes = tags.iter().map(|t| tag_hash(t)).collect();
        Ok(TagFilter::Tags { tags, hashes })
    }

    /// First stage, on a ConsumeQueue unit's tag hash: false means certainly not matching.
    pub fn matches_hash(&self, hash: TagHash) -> bool {
        match self {
            TagFilter::All => true,
            TagFilter::Tags { hashes, .. } => hashes.contains(&hash),
        }
    }

    /// Second stage, on the message's exact tag string.
    pub fn matches_tag(&self, tag: &str) -> bool {
        match self {
            TagFilter::All => true,
            TagFilter::Tags { tags, .. } => tags.contains(tag),
        }
    }

    /// True for `*`.
    pub fn is_all(&self) -> bool {
        matches!(self, TagFilter::All)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_all() {
        for e in ["", "*", "  *  ", " "] {
            assert_eq!(TagFilter::parse(e).expect("all"), TagFilter::All);
        }
        let f = TagFilter::All;
        assert!(f.matches_hash(0) && f.matches_tag("") && f.matches_tag("x") && f.is_all());
    }

    #[test]
    fn parse_tags() {
        let f = TagFilter::parse(" TagB||TagA ||  TagB ").expect("tags");
        let TagFilter::Tags { tags, hashes } = &f else {
            panic!("tags expected")
        };
        assert_eq!(tags.iter().collect::<Vec<_>>(), ["TagA", "TagB"]);
        assert_eq!(hashes.len(), 2);
        assert!(f.matches_hash(tag_hash("TagA")) && f.matches_tag("TagA"));
        assert!(!f.matches_hash(tag_hash("TagC")) && !f.matches_tag("TagC"));
        assert!(
            !f.matches_hash(0) && !f.matches_tag(""),
            "untagged messages never match tags"
        );
    }

    #[test]
    fn malformed() {
        for (e, why) in [
            ("TagA ||", "tag #1 is empty"),
            ("|| TagA", "tag #0 is empty"),
            ("TagA | TagB", "contains ' '"),
            ("TagA|x", "contains '|'"),
            ("TagA TagB", "contains ' '"),
            ("TagA || *", "only valid alone"),
            ("TagA |||| TagB", "tag #1 is empty"),
        ] {
            let err = TagFilter::parse(e).expect_err(e).to_string();
            assert!(err.contains(why), "{e}: {err}");
        }
    }

    #[test]
    fn collision_passes_first_stage_only() {
        // Force a collision by putting a foreign hash into the set.
        let mut f = TagFilter::parse("TagA").expect("parse");
        if let TagFilter::Tags { hashes, .. } = &mut f {
            hashes.insert(tag_hash("Other"));
        }
        assert!(f.matches_hash(tag_hash("Other")));
        assert!(!f.matches_tag("Other"));
    }
}
