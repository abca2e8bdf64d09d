//! Encoding and parsing of the user command bodies (`PutUser`, `DeleteUser`; byte table in
//! [`super::format`]).

use crate::codec::Reader;
use crate::codec::Writer;
use crate::error::Result;
use crate::error::StoreError;
use crate::users::Role;
use crate::users::SealedSecret;
use crate::users::User;
use crate::users::MAX_PATTERNS;

fn encode_list(w: &mut Writer<'_>, what: &str, list: &[String]) -> Result<()> {
    let n = u16::try_from(list.len())
        .map_err(|_| StoreError::invalid(format!("{} {what}s", list.len())))?;
    w.u16(n);
    for p in list {
        w.str16(what, p)?;
    }
    Ok(())
}

/// `PutUser` body: name, access key, `role` u8, `secret` (u32 length + bytes), topic
/// patterns and group patterns (each: `count` u16, then `count` strings).
pub(crate) fn encode_put_user(w: &mut Writer<'_>, u: &User) -> Result<()> {
    w.str16("user name", &u.name)?;
    w.str16("access key", &u.access_key)?;
    w.u8(u.role.to_u8());
    w.blob32("sealed secret", &u.secret.0)?;
    encode_list(w, "topic pattern", &u.topics)?;
    encode_list(w, "group pattern", &u.groups)
}

fn parse_list(r: &mut Reader<'_>, what: &str) -> Result<Vec<String>> {
    let at = r.pos();
    let n = usize::from(r.u16(what)?);
    if n > MAX_PATTERNS {
        return Err(r.corrupt(at, format!("{n} {what}s, at most {MAX_PATTERNS}")));
    }
    (0..n).map(|_| r.str16(what).map(str::to_owned)).collect()
}

/// Parses a `PutUser` body.
pub(crate) fn parse_put_user(r: &mut Reader<'_>) -> Result<User> {
    let name = r.str16("user name")?.to_owned();
    let access_key = r.str16("access key")?.to_owned();
    let at = r.pos();
    let role_byte = r.u8("role")?;
    let role = Role::from_u8(role_byte)
        .ok_or_else(|| r.corrupt(at, format!("unknown role {role_byte}")))?;
    let secret = SealedSecret(r.blob32("sealed secret")?.to_vec());
    let topics = parse_list(r, "topic pattern")?;
    let groups = parse_list(r, "group pattern")?;
    Ok(User {
        name,
        access_key,
        secret,
        role,
        topics,
        groups,
    })
}
