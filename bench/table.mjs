console.log("table: todo")
