//! The benchmark's lower bound is honest: on the same generated conversation, the bound's SQL
//! and the reference's rewind leave the same rows in every table a rewind writes.

use rewind_conformance::bench::{self, data};
use rewind_conformance::postgres::{PostgresChoice, PostgresServer, TemplateDatabase};
use sqlx::{Connection, PgConnection};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bound_and_the_reference_leave_the_same_rows() {
    let choice = match std::env::var("REWIND_DATABASE_URL") {
        Ok(url) if !url.is_empty() => PostgresChoice::Url(url),
        _ => PostgresChoice::Embedded,
    };
    let server = PostgresServer::provision(&choice).await.expect("a server");
    let template = TemplateDatabase::create(server.admin_url(), &rewind_reference::MIGRATOR)
        .await
        .expect("a template");
    // Suffixes of several lengths, in a workspace of a few other scopes.
    let seeded = template
        .derive(|conn| {
            Box::pin(async move {
                data::base(conn).await.map_err(|e| e.to_string())?;
                data::scopes(conn, "other-", 3, 120, 0)
                    .await
                    .map_err(|e| e.to_string())?;
                let mut offset = 360;
                for n in [1, 2, 7, 30, 600] {
                    data::scopes(conn, &format!("bench-n{n}-"), 1, data::PREFIX + n, offset)
                        .await
                        .map_err(|e| e.to_string())?;
                    offset += data::PREFIX + n;
                }
                Ok(())
            })
        })
        .await
        .expect("seeded");
    for n in [1, 2, 7, 30, 600] {
        let (scope, target) = bench::target_of(n);
        let by_reference = template.clone_of(&seeded).await.expect("a clone");
        let by_bound = template.clone_of(&seeded).await.expect("a clone");
        let mut reference = PgConnection::connect(&by_reference.url)
            .await
            .expect("connect");
        let mut bound = PgConnection::connect(&by_bound.url).await.expect("connect");
        let before = bench::dump(&mut bound).await.expect("dump");
        bench::reference_once(&mut reference, &scope, &target, n, true)
            .await
            .expect("the reference rewinds");
        bench::bound_once(&mut bound, &scope, &target, n, true)
            .await
            .expect("the bound rewinds");
        let expected = bench::dump(&mut reference).await.expect("dump");
        let actual = bench::dump(&mut bound).await.expect("dump");
        assert_ne!(before, actual, "N = {n}: the bound changed nothing");
        similar_asserts::assert_eq!(expected, actual, "N = {n}: reference vs bound");
    }
    template.drop_all().await.expect("dropped");
    server.shutdown().await;
}
