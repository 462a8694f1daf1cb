console.log('table: todo');
