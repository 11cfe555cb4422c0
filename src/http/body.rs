//! JSON as every answer writes it: one document followed by a newline, so that `curl` output
//! does not run into the shell prompt and line-oriented tools read one document per line.
//! Lock bodies ([`super::json::Json`]), problem documents ([`super::problem`]), health and
//! the index all go through [`to_body`]. A leaf: it knows no answer of its own.

use serde::Serialize;

/// `value` as JSON followed by `\n`.
pub fn to_body<T: Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    // One allocation for the usual lock body, newline included (to_vec then push could grow it).
    let mut body = Vec::with_capacity(256);
    serde_json::to_writer(&mut body, value)?;
    body.push(b'\n');
    Ok(body)
}
