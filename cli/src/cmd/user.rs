//! `raftmq user create|list|delete`: the users of an authenticated cluster (admin only).

use clap::Subcommand;
use raftmq_client::proto::UserInfo;

use super::Global;
use crate::output::print_json;
use crate::output::table;

/// User commands.
#[derive(Debug, Subcommand)]
pub enum UserCmd {
    /// Create a user; prints its access key and secret key (the secret is shown only here).
    #[command(
        after_help = "Example: raftmq user create billing-app --role producer --topics 'orders*,audit'"
    )]
    Create {
        /// Name (1..=64 of [A-Za-z0-9._-]).
        name: String,
        /// Role: admin (everything), producer (send to its topics), consumer (read and
        /// consume its topics with its groups).
        #[arg(long, value_parser = ["admin", "producer", "consumer"])]
        role: String,
        /// Topic patterns, comma-separated; `*` matches any run of characters.
        #[arg(long, value_delimiter = ',')]
        topics: Vec<String>,
        /// Consumer group patterns, comma-separated; `*` matches any run of characters.
        #[arg(long, value_delimiter = ',')]
        groups: Vec<String>,
    },
    /// List the users (no secrets).
    #[command(after_help = "Example: raftmq user list --json")]
    List,
    /// Delete a user.
    #[command(after_help = "Example: raftmq user delete billing-app")]
    Delete {
        /// Name.
        name: String,
    },
}

fn row(u: &UserInfo) -> Vec<String> {
    vec![
        u.name.clone(),
        u.role.clone(),
        u.access_key.clone(),
        u.topics.join(","),
        u.groups.join(","),
    ]
}

const HEADERS: [&str; 5] = ["USER", "ROLE", "ACCESS KEY", "TOPICS", "GROUPS"];

/// Runs a user command.
pub async fn run(g: &Global, cmd: UserCmd) -> anyhow::Result<i32> {
    let client = g.client()?;
    match cmd {
        UserCmd::Create {
            name,
            role,
            topics,
            groups,
        } => {
            let r = client.create_user(&name, &role, topics, groups).await?;
            let access_key = r.user.map(|u| u.access_key).unwrap_or_default();
            if g.json {
                print_json(&serde_json::json!({
                    "access_key": access_key,
                    "secret_key": r.secret_key,
                }))?;
            } else {
                println!("created user {name} (role {role})");
                println!("access key: {access_key}");
                println!("secret key: {}", r.secret_key);
                println!("(the secret key is not shown again)");
            }
        }
        UserCmd::List => {
            let users = client.list_users().await?;
            if g.json {
                let v: Vec<_> = users
                    .iter()
                    .map(|u| {
                        serde_json::json!({
                            "name": u.name, "role": u.role, "access_key": u.access_key,
                            "topics": u.topics, "groups": u.groups,
                        })
                    })
                    .collect();
                print_json(&v)?;
            } else {
                let rows: Vec<Vec<String>> = users.iter().map(row).collect();
                println!("{}", table(&HEADERS, &rows));
            }
        }
        UserCmd::Delete { name } => {
            client.delete_user(&name).await?;
            if g.json {
                print_json(&serde_json::json!({ "deleted": name }))?;
            } else {
                println!("deleted user {name}");
            }
        }
    }
    Ok(0)
}
