// The Thrift pair's services (see README.md).
namespace py social

exception NotFound { 1: string what }

service Users {
  string getUser(1: i64 id) throws (1: NotFound missing),
  oneway void log(1: string line),
}

service Posts {
  list<string> timeline(1: i64 user, 2: i32 count),
}
