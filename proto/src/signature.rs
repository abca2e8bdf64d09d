//! The RocketMQ 5 request signature (`MQv2-HMAC-SHA1`), shared by the clients that sign and the
//! node that verifies, so raftmq's CLI and the official RocketMQ clients use one credential.
//!
//! A signed call carries two metadata entries:
//! - `x-mq-date-time`: the client's clock, RFC 3339 (the Rust client 5.0.0, e.g.
//!   `2024-05-01T10:20:30.123+02:00`) or `yyyyMMdd'T'HHmmss'Z'` (the Java client, UTC);
//! - `authorization`: `MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time,
//!   Signature=<hex HMAC-SHA1(secret key, x-mq-date-time)>`.
//!
//! [`parse_authorization`] reads the header (a malformed one is an error naming what is wrong),
//! [`verify_signature`] checks the signature (hex read case-insensitively, compared in constant
//! time), [`parse_date_time`] reads either date format, [`sign`] builds both values.

use hmac::Hmac;
use hmac::Mac;
use sha1::Sha1;
use subtle::ConstantTimeEq;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::OffsetDateTime;
use time::PrimitiveDateTime;

/// Metadata key of the signed date-time.
pub const DATE_TIME_KEY: &str = "x-mq-date-time";
/// Metadata key of the signature.
pub const AUTHORIZATION_KEY: &str = "authorization";
/// The only algorithm: the first word of the `authorization` value.
pub const ALGORITHM: &str = "MQv2-HMAC-SHA1";
/// The only signed header.
pub const SIGNED_HEADERS: &str = "x-mq-date-time";

/// Longest `authorization` value read (a real one is about 120 bytes).
pub const MAX_AUTHORIZATION_BYTES: usize = 1024;

/// Why an `authorization` or `x-mq-date-time` value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The header is not of the documented form.
    #[error("malformed authorization header: {0}")]
    Malformed(String),
    /// The date-time is in neither accepted format.
    #[error("malformed {DATE_TIME_KEY} {value:?}: expected RFC 3339 or yyyyMMddTHHmmssZ")]
    BadDateTime {
        /// The value (cut to 64 bytes).
        value: String,
    },
    /// The signature does not match the secret key.
    #[error("bad signature")]
    BadSignature,
}

/// The parts of an `authorization` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorization {
    /// The access key (`Credential=`).
    pub access_key: String,
    /// The signature bytes (`Signature=`, hex decoded).
    pub signature: Vec<u8>,
}

fn malformed(what: impl Into<String>) -> SignatureError {
    SignatureError::Malformed(what.into())
}

/// Parses `MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>`.
/// The three fields may come in any order, separated by commas (spaces around them ignored).
pub fn parse_authorization(value: &str) -> Result<Authorization, SignatureError> {
    if value.len() > MAX_AUTHORIZATION_BYTES {
        return Err(malformed(format!(
            "{} bytes, at most {MAX_AUTHORIZATION_BYTES}",
            value.len()
        )));
    }
    let (algorithm, rest) = value
        .trim()
        .split_once(' ')
        .ok_or_else(|| malformed(format!("expected \"{ALGORITHM} Credential=..\"")))?;
    if algorithm != ALGORITHM {
        return Err(malformed(format!(
            "algorithm {:?} is not {ALGORITHM}",
            cut(algorithm)
        )));
    }
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let (k, v) = part
            .trim()
            .split_once('=')
            .ok_or_else(|| malformed(format!("field {:?} has no '='", cut(part.trim()))))?;
        let slot = match k {
            "Credential" => &mut credential,
            "SignedHeaders" => &mut signed,
            "Signature" => &mut signature,
            other => return Err(malformed(format!("unknown field {:?}", cut(other)))),
        };
        if slot.replace(v.trim()).is_some() {
            return Err(malformed(format!("field {k} given twice")));
        }
    }
    let access_key = credential.ok_or_else(|| malformed("no Credential"))?;
    if access_key.is_empty() {
        return Err(malformed("empty Credential"));
    }
    match signed {
        Some(s) if s.eq_ignore_ascii_case(SIGNED_HEADERS) => {}
        Some(s) => {
            return Err(malformed(format!(
                "SignedHeaders {:?} is not {SIGNED_HEADERS}",
                cut(s)
            )))
        }
        None => return Err(malformed("no SignedHeaders")),
    }
    let hex_sig = signature.ok_or_else(|| malformed("no Signature"))?;
    let signature =
        hex::decode(hex_sig).map_err(|e| malformed(format!("Signature is not hex: {e}")))?;
    if signature.len() != 20 {
        return Err(malformed(format!(
            "Signature has {} bytes, an HMAC-SHA1 has 20",
            signature.len()
        )));
    }
    Ok(Authorization {
        access_key: access_key.to_string(),
        signature,
    })
}

fn cut(s: &str) -> String {
    s.chars().take(64).collect()
}

fn mac(secret_key: &[u8], date_time: &str) -> Hmac<Sha1> {
    let mut m =
        <Hmac<Sha1> as Mac>::new_from_slice(secret_key).expect("HMAC takes a key of any length");
    m.update(date_time.as_bytes());
    m
}

/// The hex HMAC-SHA1 of `date_time` under `secret_key` (lower case, as the clients send it).
pub fn signature_hex(secret_key: &[u8], date_time: &str) -> String {
    hex::encode(mac(secret_key, date_time).finalize().into_bytes())
}

/// Checks `signature` (decoded bytes) against `secret_key` and `date_time`, in constant time.
pub fn verify_signature(
    secret_key: &[u8],
    date_time: &str,
    signature: &[u8],
) -> Result<(), SignatureError> {
    let expected = mac(secret_key, date_time).finalize().into_bytes();
    if bool::from(expected.as_slice().ct_eq(signature)) {
        Ok(())
    } else {
        Err(SignatureError::BadSignature)
    }
}

/// Parses an `x-mq-date-time` value: RFC 3339 or `yyyyMMdd'T'HHmmss'Z'` (UTC).
pub fn parse_date_time(value: &str) -> Result<OffsetDateTime, SignatureError> {
    let bad = || SignatureError::BadDateTime { value: cut(value) };
    if let Ok(t) = OffsetDateTime::parse(value, &Rfc3339) {
        return Ok(t);
    }
    let compact = format_description!("[year][month][day]T[hour][minute][second]Z");
    PrimitiveDateTime::parse(value, &compact)
        .map(PrimitiveDateTime::assume_utc)
        .map_err(|_| bad())
}

/// The two metadata values that sign a call made at `now`: `(x-mq-date-time, authorization)`.
pub fn sign(access_key: &str, secret_key: &str, now: OffsetDateTime) -> (String, String) {
    let date_time = now
        .format(&Rfc3339)
        .expect("an OffsetDateTime within years 0..=9999 formats as RFC 3339");
    let authorization = format!(
        "{ALGORITHM} Credential={access_key}, SignedHeaders={SIGNED_HEADERS}, Signature={}",
        signature_hex(secret_key.as_bytes(), &date_time)
    );
    (date_time, authorization)
}

/// [`sign`] at the current time.
pub fn sign_now(access_key: &str, secret_key: &str) -> (String, String) {
    sign(access_key, secret_key, OffsetDateTime::now_utc())
}

#[cfg(test)]
#[path = "signature_tests.rs"]
mod tests;
