//! Messages: the owned [`Message`], its on-disk record ([`format`](mod@format)) and the borrowed
//! [`MessageView`] used on the dispatch and read paths.

pub mod format;
mod owned;

pub use format::MessageView;
pub use owned::Message;
