//! A record's lists of strings (its keys, its properties), read in place.
//!
//! [`MessageView::parse`](super::MessageView::parse) checks every string of a record (bounds,
//! UTF-8, property order) and keeps each list as its bytes in the record: a view costs no
//! allocation, and what apply does not read (most properties, on every node, for every
//! message) is not copied anywhere. Most records' strings are validated in one pass over their
//! whole variable part (see [`Text`]); the lists then hand out slices of that `&str`.

/// The bytes of a record's strings, as the parse validated them: the whole variable part as
/// one `&str` when it is UTF-8 as a whole (every length prefix below 128 is ASCII, so any
/// record of short strings is), else the raw bytes, each string validated again as it is read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Text<'a> {
    /// Valid UTF-8 as a whole; a string is the slice between its length prefixes.
    Utf8(&'a str),
    /// Not UTF-8 as a whole (a length prefix of 128..=255 bytes, say).
    Bytes(&'a [u8]),
}

impl<'a> Text<'a> {
    pub(crate) fn bytes(&self) -> &'a [u8] {
        match self {
            Text::Utf8(s) => s.as_bytes(),
            Text::Bytes(b) => b,
        }
    }

    /// The string at `at..at + len`: a slice of the validated text, or the bytes validated now.
    /// `None` if that is not a UTF-8 string (the parse's errors come from there).
    pub(crate) fn str_at(&self, at: usize, len: usize) -> Option<&'a str> {
        let end = at.checked_add(len)?;
        match self {
            // Not on a character boundary: the text is UTF-8 only with its length bytes.
            Text::Utf8(s) => s.get(at..end),
            Text::Bytes(b) => std::str::from_utf8(b.get(at..end)?).ok(),
        }
    }
}

/// `count` strings, each a `u16` length and that many bytes of UTF-8, back to back in `text`
/// from `start`: a record's keys, or its properties as name, value, name, value ...
#[derive(Clone, Copy, Debug)]
pub struct Strings<'a> {
    text: Text<'a>,
    start: usize,
    count: u32,
}

impl<'a> Strings<'a> {
    /// A list the parse has checked: `count` strings from `start` of `text`, every one valid.
    pub(crate) fn new(text: Text<'a>, start: usize, count: u32) -> Self {
        Strings { text, start, count }
    }

    /// How many strings.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The strings in record order.
    pub fn iter(&self) -> StringsIter<'a> {
        StringsIter {
            text: self.text,
            at: self.start,
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for &Strings<'a> {
    type Item = &'a str;
    type IntoIter = StringsIter<'a>;

    fn into_iter(self) -> StringsIter<'a> {
        self.iter()
    }
}

impl PartialEq for Strings<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Strings<'_> {}

/// The strings of a [`Strings`].
#[derive(Clone, Debug)]
pub struct StringsIter<'a> {
    text: Text<'a>,
    at: usize,
    left: u32,
}

impl<'a> Iterator for StringsIter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.left == 0 {
            return None;
        }
        let b = self.text.bytes();
        let len = usize::from(u16::from_le_bytes([*b.get(self.at)?, *b.get(self.at + 1)?]));
        // The parse validated each string, so this always finds one; if it did not, the list
        // ends here rather than panicking.
        let s = self.text.str_at(self.at + 2, len);
        self.left = if s.is_some() { self.left - 1 } else { 0 };
        self.at += 2 + len;
        s
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

/// A record's properties: pairs of name and value, names strictly increasing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Properties<'a>(Strings<'a>);

impl<'a> Properties<'a> {
    /// `count` properties (twice as many strings) from `start` of `text`, all checked.
    pub(crate) fn new(text: Text<'a>, start: usize, count: u16) -> Self {
        Properties(Strings::new(text, start, 2 * u32::from(count)))
    }

    /// How many properties.
    pub fn len(&self) -> usize {
        self.0.len() / 2
    }

    /// The names and values as one list: name, value, name, value ...
    pub(crate) fn strings(&self) -> Strings<'a> {
        self.0
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Name and value of each property, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        let mut it = self.0.iter();
        std::iter::from_fn(move || Some((it.next()?, it.next()?)))
    }

    /// The value of the property `name`, if the record has it.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.iter()
            .take_while(|(n, _)| *n <= name)
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }
}
