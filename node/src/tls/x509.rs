//! The few fields of an X.509 certificate a node reads itself: serial number, not-after date
//! and the subject alternative names (URI, IP, DNS), by a bounds-checked DER walk.
//!
//! rustls/webpki verify the chain and the names; this only reads what the member check
//! (`raftmq://<cluster-id>/node/<id>` URI SAN) and the "active certificate" log line need.
//! Certificates come off the network: every length is checked, nothing panics.

/// What a node reads from a certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertFields {
    /// The serial number, lower-case hex.
    pub serial_hex: String,
    /// The not-after date, RFC 3339 UTC (`2027-12-01T16:00:00Z`).
    pub not_after: String,
    /// URI subject alternative names.
    pub uris: Vec<String>,
    /// IP subject alternative names.
    pub ips: Vec<std::net::IpAddr>,
    /// DNS subject alternative names.
    pub dns: Vec<String>,
}

/// Why a certificate could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed certificate: {0}")]
pub struct CertParseError(pub &'static str);

type Res<T> = Result<T, CertParseError>;

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const OCTET_STRING: u8 = 0x04;
const OID: u8 = 0x06;
const BOOLEAN: u8 = 0x01;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
const VERSION_TAG: u8 = 0xA0;
const EXTENSIONS_TAG: u8 = 0xA3;
/// 2.5.29.17, subjectAltName.
const SAN_OID: [u8; 3] = [0x55, 0x1D, 0x11];
const SAN_DNS: u8 = 0x82;
const SAN_URI: u8 = 0x86;
const SAN_IP: u8 = 0x87;

/// One DER element: (tag, contents, the bytes after it).
fn tlv(buf: &[u8]) -> Res<(u8, &[u8], &[u8])> {
    let (&tag, rest) = buf.split_first().ok_or(CertParseError("truncated tag"))?;
    let (&first, rest) = rest
        .split_first()
        .ok_or(CertParseError("truncated length"))?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7F);
        if n == 0 || n > 4 || rest.len() < n {
            return Err(CertParseError("bad length"));
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return Err(CertParseError("element longer than its container"));
    }
    Ok((tag, &rest[..len], &rest[len..]))
}

/// The next element, which must have `tag`.
fn expect<'a>(buf: &'a [u8], tag: u8, what: &'static str) -> Res<(&'a [u8], &'a [u8])> {
    let (t, body, rest) = tlv(buf)?;
    if t != tag {
        return Err(CertParseError(what));
    }
    Ok((body, rest))
}

/// Reads the fields of one DER certificate.
pub fn parse(der: &[u8]) -> Res<CertFields> {
    let (cert, _) = expect(der, SEQUENCE, "not a certificate sequence")?;
    let (tbs, _) = expect(cert, SEQUENCE, "no tbsCertificate")?;
    let mut rest = tbs;
    let (tag, _, after) = tlv(rest)?;
    if tag == VERSION_TAG {
        rest = after;
    }
    let (serial, rest) = expect(rest, INTEGER, "no serial number")?;
    let (_, rest) = expect(rest, SEQUENCE, "no signature algorithm")?;
    let (_, rest) = expect(rest, SEQUENCE, "no issuer")?;
    let (validity, rest) = expect(rest, SEQUENCE, "no validity")?;
    let (_, _, after_before) = tlv(validity)?;
    let (time_tag, not_after, _) = tlv(after_before)?;
    let (_, rest) = expect(rest, SEQUENCE, "no subject")?;
    let (_, mut rest) = expect(rest, SEQUENCE, "no public key")?;
    let mut fields = CertFields {
        serial_hex: serial.iter().map(|b| format!("{b:02x}")).collect(),
        not_after: time(time_tag, not_after)?,
        ..CertFields::default()
    };
    while !rest.is_empty() {
        let (tag, body, after) = tlv(rest)?;
        if tag == EXTENSIONS_TAG {
            extensions(body, &mut fields)?;
        }
        rest = after;
    }
    Ok(fields)
}

fn extensions(body: &[u8], fields: &mut CertFields) -> Res<()> {
    let (mut list, _) = expect(body, SEQUENCE, "extensions not a sequence")?;
    while !list.is_empty() {
        let (ext, after) = expect(list, SEQUENCE, "extension not a sequence")?;
        list = after;
        let (oid, rest) = expect(ext, OID, "extension without an OID")?;
        let (tag, body, after) = tlv(rest)?;
        let value = if tag == BOOLEAN {
            expect(after, OCTET_STRING, "extension value not an octet string")?.0
        } else if tag == OCTET_STRING {
            body
        } else {
            return Err(CertParseError("extension value not an octet string"));
        };
        if oid == SAN_OID {
            alt_names(value, fields)?;
        }
    }
    Ok(())
}

fn alt_names(value: &[u8], fields: &mut CertFields) -> Res<()> {
    let (mut names, _) = expect(value, SEQUENCE, "subjectAltName not a sequence")?;
    while !names.is_empty() {
        let (tag, body, after) = tlv(names)?;
        names = after;
        let text =
            || String::from_utf8(body.to_vec()).map_err(|_| CertParseError("name not ASCII"));
        match tag {
            SAN_URI => fields.uris.push(text()?),
            SAN_DNS => fields.dns.push(text()?),
            SAN_IP => match body.len() {
                4 => fields.ips.push(
                    <[u8; 4]>::try_from(body)
                        .map_err(|_| CertParseError("ip"))?
                        .into(),
                ),
                16 => fields.ips.push(
                    <[u8; 16]>::try_from(body)
                        .map_err(|_| CertParseError("ip"))?
                        .into(),
                ),
                _ => return Err(CertParseError("IP address of a bad length")),
            },
            _ => {}
        }
    }
    Ok(())
}

/// UTCTime `YYMMDDHHMMSSZ` or GeneralizedTime `YYYYMMDDHHMMSSZ` as RFC 3339.
fn time(tag: u8, body: &[u8]) -> Res<String> {
    let s = std::str::from_utf8(body).map_err(|_| CertParseError("time not ASCII"))?;
    let digits = s
        .strip_suffix('Z')
        .ok_or(CertParseError("time not in UTC"))?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CertParseError("time not digits"));
    }
    let full = match (tag, digits.len()) {
        (UTC_TIME, 12) => {
            // RFC 5280: YY >= 50 is 19YY, else 20YY.
            let century = if digits < "50" { "20" } else { "19" };
            format!("{century}{digits}")
        }
        (GENERALIZED_TIME, 14) => digits.to_string(),
        _ => return Err(CertParseError("bad time")),
    };
    Ok(format!(
        "{}-{}-{}T{}:{}:{}Z",
        &full[0..4],
        &full[4..6],
        &full[6..8],
        &full[8..10],
        &full[10..12],
        &full[12..14]
    ))
}
