//! Redis's glob patterns (`PSUBSCRIBE`, `SCAN … MATCH`, `CONFIG GET`): `*`, `?`, `[…]` with
//! ranges and `^`, and `\` quoting the next byte. Byte-wise, case-sensitive (util.c
//! `stringmatchlen`).

pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    match_from(pattern, text)
}

fn match_from(mut p: &[u8], mut s: &[u8]) -> bool {
    while let Some(&c) = p.first() {
        match c {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                for start in 0..=s.len() {
                    if match_from(&p[1..], &s[start..]) {
                        return true;
                    }
                }
                return false;
            }
            b'?' => {
                if s.is_empty() {
                    return false;
                }
                s = &s[1..];
                p = &p[1..];
            }
            b'[' => {
                let Some(&byte) = s.first() else {
                    return false;
                };
                let mut i = 1;
                let not = p.get(i) == Some(&b'^');
                if not {
                    i += 1;
                }
                let mut hit = false;
                loop {
                    match p.get(i) {
                        None => {
                            // An unclosed class: Redis treats the end as closing it.
                            i -= 1;
                            break;
                        }
                        Some(b'\\') if i + 1 < p.len() => {
                            i += 1;
                            if p[i] == byte {
                                hit = true;
                            }
                        }
                        Some(b']') => break,
                        Some(&lo) if p.get(i + 1) == Some(&b'-') && i + 2 < p.len() => {
                            let hi = p[i + 2];
                            let (lo, hi) = if lo > hi { (hi, lo) } else { (lo, hi) };
                            if byte >= lo && byte <= hi {
                                hit = true;
                            }
                            i += 2;
                        }
                        Some(&other) => {
                            if other == byte {
                                hit = true;
                            }
                        }
                    }
                    i += 1;
                }
                if hit == not {
                    return false;
                }
                s = &s[1..];
                p = &p[(i + 1).min(p.len())..];
            }
            b'\\' if p.len() >= 2 => {
                if s.first() != Some(&p[1]) {
                    return false;
                }
                s = &s[1..];
                p = &p[2..];
            }
            _ => {
                if s.first() != Some(&c) {
                    return false;
                }
                s = &s[1..];
                p = &p[1..];
            }
        }
    }
    s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_as_redis_matches_them() {
        let yes = [
            ("*", ""),
            ("lockgate:*", "lockgate:{a}"),
            ("a?c", "abc"),
            ("[a-c]x", "bx"),
            ("[^a-c]x", "dx"),
            ("\\*", "*"),
            ("lockgate:\\{a\\}*", "lockgate:{a}:fence"),
            ("maxmemory*", "maxmemory-policy"),
        ];
        let no = [
            ("lockgate:*", "other"),
            ("a?c", "ac"),
            ("[a-c]x", "dx"),
            ("[^a-c]x", "ax"),
            ("\\*", "a"),
            ("lockgate:\\{a\\}*", "lockgate:{ab}"),
        ];
        for (p, s) in yes {
            assert!(matches(p.as_bytes(), s.as_bytes()), "{p} ~ {s}");
        }
        for (p, s) in no {
            assert!(!matches(p.as_bytes(), s.as_bytes()), "{p} !~ {s}");
        }
    }
}
