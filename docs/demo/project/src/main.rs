fn greet(name: &str) -> String {
    format!("hello, {}", name)
}

fn main() {
    println!("{}", greet("world"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets_by_name() {
        assert_eq!(greet("world"), "hello, world");
    }
}
